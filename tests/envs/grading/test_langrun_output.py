"""The test run's console log, as a language runner's log parser reads it, against a real
engine."""

from __future__ import annotations

import re

import pytest

from repogym.envs.grading.langrun import run_argv
from repogym.sandbox.base import SandboxConfig
from repogym.sandbox.docker import DockerSandbox

pytestmark = pytest.mark.docker

# what cargo and libtest do: status lines on stderr in several writes, results on stdout
NOISY = ("for i in $(seq 3000); do printf '     Running' >&2; printf ' tests/x.rs\\n' >&2; "
         "echo \"test t$i ... ok\"; done")
LINE = re.compile(r"^test\s+(\S+)\s+\.\.\.\s+(\w+)$")  # swebench's parse_log_cargo


def test_stderr_written_in_pieces_never_splits_a_result_line(toy_image: str) -> None:
    box = DockerSandbox(SandboxConfig(image=toy_image, role="grader", shell=False))
    try:
        result = box.exec(run_argv(NOISY), timeout=120, limit=1_000_000)
    finally:
        box.close()
    assert result.exit_code == 0, result.output[-500:]
    lines = result.output.splitlines()
    broken = [line for line in lines if "test t" in line and not LINE.match(line.strip())]
    assert not broken, f"{len(broken)} result lines broken by stderr, e.g. {broken[:3]}"
    assert sum(bool(LINE.match(line.strip())) for line in lines) == 3000
