"""The demo-langs suite: JavaScript (Jest), Go, Rust and Java tasks graded in Docker.

In each language one task's gold patch resolves it and the empty patch does not (the others
differ only in their patches: ``repogym tasks validate --suite demo-langs`` checks all twelve,
and ``tasks/demo/langs/build.py --measure`` measured every list). Each language's toolchain
image is built once per session (the ``toolchain`` fixture).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from repogym.suite import load_suite
from repogym.tasks.validate import validate_task

BUILD = Path(__file__).resolve().parents[2] / "tasks" / "demo" / "langs" / "build.py"
TASKS = {t.instance_id: t for t in load_suite("demo-langs")}
LANGUAGES = {"javascript", "go", "rust", "java"}
ORDER = ["javascript", "go", "rust", "java"]  # the quickest toolchain image first


def test_suite_is_current_and_measured() -> None:
    proc = subprocess.run([sys.executable, str(BUILD), "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert {t.environment.language for t in TASKS.values()} == LANGUAGES
    for task in TASKS.values():
        assert task.FAIL_TO_PASS, f"{task.instance_id} has no measured FAIL_TO_PASS"
        assert {t.split for t in TASKS.values() if t.repo == task.repo} == {"train", "eval"}


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("instance_id", [
    pytest.param(i, marks=pytest.mark.toolchain(t.environment.language))
    for i, t in sorted(TASKS.items(), key=lambda kv: ORDER.index(kv[1].environment.language))
    if i.endswith("-1")])
def test_gold_resolves_and_empty_does_not(instance_id: str,
                                          toolchain: Callable[[str], str]) -> None:
    task = TASKS[instance_id]
    toolchain(task.environment.language)
    result = validate_task(task, runs=1)
    assert result.ok, result.reason
