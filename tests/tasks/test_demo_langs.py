"""The demo-langs suite: JavaScript (Jest), Go, Rust and Java tasks graded in Docker.

Every language's toolchain image is built on the first run (Node.js about 4 minutes, Java 3,
Go and Rust 2 on a 2-core machine), so CI validates the Go tasks and leaves the other languages
to ``REPOGYM_TEST_LANGS=all`` (or a comma list: ``javascript,rust``), run before a release and
whenever a runner changes; ``tasks/demo/langs/build.py --measure`` measured every list.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from repogym import settings
from repogym.tasks.suite import load_suite
from repogym.tasks.validate import validate_task

BUILD = Path(__file__).resolve().parents[2] / "tasks" / "demo" / "langs" / "build.py"
TASKS = {t.instance_id: t for t in load_suite("demo-langs")}
LANGUAGES = {"javascript", "go", "rust", "java"}


def wanted(language: str) -> bool:
    chosen = settings.TEST_LANGS.get()
    return chosen == "all" or language in {c.strip() for c in chosen.split(",")}


def test_suite_is_current_and_measured() -> None:
    proc = subprocess.run([sys.executable, str(BUILD), "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert {t.environment.language for t in TASKS.values()} == LANGUAGES
    for task in TASKS.values():
        assert task.FAIL_TO_PASS, f"{task.instance_id} has no measured FAIL_TO_PASS"
        assert {t.split for t in TASKS.values() if t.repo == task.repo} == {"train", "eval"}


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("instance_id", sorted(TASKS))
def test_gold_resolves_and_empty_does_not(instance_id: str) -> None:
    task = TASKS[instance_id]
    if not wanted(task.environment.language):
        pytest.skip(f"{task.environment.language}: set REPOGYM_TEST_LANGS=all to build its "
                    "toolchain image and run it")
    result = validate_task(task, runs=1)
    assert result.ok, result.reason
