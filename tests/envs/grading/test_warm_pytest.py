"""pytest imported ahead of time in warm grading containers, against a real engine."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from repogym.envs.grading.grader import TEST_ENV, Grader, GraderConfig
from repogym.envs.grading.warm_pytest import WarmPytest, pytest_argv
from repogym.sandbox.base import SandboxConfig
from repogym.sandbox.docker import DockerSandbox
from repogym.sandbox.pool import SandboxPool
from repogym.schema import Environment, Task

SPIN = (
    "diff --git a/calc/spin.py b/calc/spin.py\nnew file mode 100644\n--- /dev/null\n"
    "+++ b/calc/spin.py\n@@ -0,0 +1,2 @@\n+while True:\n+    pass\n"
    "diff --git a/calc/__init__.py b/calc/__init__.py\n--- a/calc/__init__.py\n"
    '+++ b/calc/__init__.py\n@@ -1,2 +1,3 @@\n """A tiny calculator."""\n'
    "+import calc.spin\n \n"
)


def test_only_plain_pytest_commands_are_run_warm() -> None:
    assert pytest_argv("python -m pytest -rA") == ("module", ["-rA"])
    assert pytest_argv("pytest --no-header -rA t") == ("script", ["--no-header", "-rA", "t"])
    assert pytest_argv("tox -e py311") is None
    assert pytest_argv("PYTHONPATH=src pytest") is None
    assert pytest_argv("python -m pytest 'unclosed") is None


@pytest.fixture()
def pooled(toy_image: str) -> Iterator[tuple[Grader, SandboxPool]]:
    pool = SandboxPool(grader_size=1)
    grader = Grader(GraderConfig(timeout=5), seed=2, pool=pool)
    try:
        yield grader, pool
    finally:
        pool.close()


def _warm(pool: SandboxPool, grader: Grader, image: str) -> None:
    grader.warm(image)
    deadline = time.monotonic() + 60
    while pool._ready[(image, "grader")].qsize() < 1:
        assert time.monotonic() < deadline, pool.errors
        time.sleep(0.1)


@pytest.mark.docker
def test_a_warm_grader_runs_the_tests_in_its_waiting_pytest(
    pooled: tuple[Grader, SandboxPool], toy_task: Task, toy_image: str
) -> None:
    grader, pool = pooled
    for patch, resolved in [(toy_task.patch, True), ("", False)]:
        _warm(pool, grader, toy_image)
        report = grader.grade(toy_task, patch, toy_image)
        assert report.warm_pytest and report.valid and report.resolved is resolved
        assert set(report.canaries.values()) == {"PASSED", "FAILED"}
        assert report.exit_code == 1  # the failing canary
    hang = grader.grade(toy_task, SPIN, toy_image)  # a fresh one is started for it
    assert hang.warm_pytest and hang.timed_out and not hang.resolved and "timeout" in hang.flags
    assert hang.total_seconds < 30


@pytest.mark.docker
def test_a_command_that_is_not_plain_pytest_runs_in_a_fresh_process(
    pooled: tuple[Grader, SandboxPool], toy_task: Task, toy_image: str
) -> None:
    grader, pool = pooled
    _warm(pool, grader, toy_image)
    task = toy_task.with_(environment=Environment(test_cmd="env python -m pytest -rA"))
    report = grader.grade(task, toy_task.patch, toy_image)
    assert report.resolved and not report.warm_pytest


@pytest.mark.docker
def test_pytest_shadowed_by_the_repository_is_refused(toy_image: str) -> None:
    box = DockerSandbox(SandboxConfig(image=toy_image, role="grader"))
    try:
        box.run("echo 'VALUE = 1' > iniconfig.py")  # pytest imports iniconfig
        warm = WarmPytest.start(box, TEST_ENV)
        assert not warm.wait_ready(30)
        box.run("rm iniconfig.py")
        assert WarmPytest.start(box, TEST_ENV).wait_ready(30)
    finally:
        box.close()


@pytest.mark.docker
def test_a_run_sent_with_done_ends_at_pytests_return(toy_image: str) -> None:
    """The decoy run's form: the status is pytest's, said when it returned; what the
    interpreter's exit does after (an atexit handler's output, its own exit status) is not
    waited for. Without ``done`` the process's exit is the run's end, as before."""
    box = DockerSandbox(SandboxConfig(image=toy_image, role="grader"))
    try:
        box.run("mkdir -p late && printf '%s\\n' 'import atexit, os, sys' "
                "'atexit.register(lambda: (print(\"AFTER EXIT\", flush=True), os._exit(0)))' "
                "'def test_fails():' '    assert False' > late/test_late.py", timeout=30)
        results = {}
        for done in ("", "f00d"):
            warm = WarmPytest.start(box, TEST_ENV)
            assert warm.wait_ready(30)
            warm.send(["-p", "no:cacheprovider", "late/test_late.py"], "module", [], done=done)
            results[done] = warm.finish(box, 60, 100_000, lambda: None)
        plain, quick = results[""], results["f00d"]
        assert plain.exit_code == 0 and "AFTER EXIT" in plain.output  # the atexit handler's
        assert quick.exit_code == 1 and "1 failed" in quick.output  # pytest's own status
        assert "AFTER EXIT" not in quick.output and "__RG_PYTEST_DONE" not in quick.output
    finally:
        box.close()


@pytest.mark.docker
def test_the_repository_the_image_puts_on_sys_path_stays_there(toy_image: str) -> None:
    """An image that puts /testbed on sys.path itself (PYTHONPATH, an editable install's
    .pth) has the tests import from it under the pytest script, which puts only its own
    folder first: the warm runner takes away what `python -c` added, not that."""
    box = DockerSandbox(SandboxConfig(image=toy_image, role="grader"))
    try:
        box.run("mkdir -p deep && echo 'VALUE = 7' > helper_top.py && printf '%s\\n' "
                "'import helper_top' 'def test_top():' '    assert helper_top.VALUE == 7' "
                "> deep/test_top.py", timeout=30)
        env = {**TEST_ENV, "PYTHONPATH": box.workdir}
        cold = box.run("PYTHONPATH=$PWD pytest -p no:cacheprovider deep/test_top.py", timeout=60)
        assert cold.exit_code == 0, cold.output
        warm = WarmPytest.start(box, env)
        assert warm.wait_ready(30)
        warm.send(["-p", "no:cacheprovider", "deep/test_top.py"], "script", [])
        result = warm.finish(box, 60, 100_000, lambda: None)
        assert result.exit_code == 0 and "1 passed" in result.output, result.output
    finally:
        box.close()
