"""A grader that runs a task's tests in a local folder, with this host's tools: the fake
backend's (``sandbox="fake"``), so that the env's contract is tested without Docker.

It follows the real grader's path (the agent's diff without its changes to the task's test
files, the test patch, one test run, statuses read from the log, a verdict from explicit passes
and swebench's resolution status) but defends against nothing: no fresh container, no
canaries, no second result source, and the tests run as this user with this host's Python.
Never use it to claim anything about grading that cannot be gamed.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from repogym.envs.grading import scoring, stage
from repogym.envs.grading.box import TEST_ENV
from repogym.envs.grading.flags import Flag, tampered_flags
from repogym.envs.grading.grader import GraderConfig
from repogym.envs.grading.report import GradingReport
from repogym.envs.grading.results import parse_log
from repogym.envs.grading.testcmd import test_files
from repogym.errors import TaskError
from repogym.repo import export_tree, git, snapshot
from repogym.schema import Task


class LocalGrader:
    """Grades in a temporary folder holding the task's source at its base commit."""

    def __init__(self, config: GraderConfig | None = None):
        self.config = config or GraderConfig()

    def warm(self, image: str) -> None:
        """Nothing to start ahead of time."""

    def grade(self, task: Task, patch: str, image: str) -> GradingReport:
        report = GradingReport(task.instance_id, image=image, empty_patch=not patch.strip())
        start = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="repogym-grade-") as tmp:
            tree = Path(tmp) / "testbed"
            export_tree(task.source or "", task.base_commit, tree)
            snapshot(tree)
            if self._apply(task, patch, tree, report):
                report.compiles = _compiles(tree, [p for p in report.changed if p.endswith(".py")
                                                   and p not in report.stripped])
                log = self._run_tests(task, tree, report)
                judge(task, parse_log(log, task.environment.log_parser), report)
        report.total_seconds = time.monotonic() - start
        return report

    def _apply(self, task: Task, patch: str, tree: Path, report: GradingReport) -> bool:
        """The agent's patch minus its changes to the task's test files, then the test patch."""
        changed = stage.patch_paths(patch)
        hidden = frozenset(stage.header_paths(task.test_patch)) | set(
            task.environment.test_files)
        report.stripped = stage.protected_by_name(changed, hidden)
        report.flags += tampered_flags(report.stripped)
        excluded = [f"--exclude={path}" for path in report.stripped]
        applied = _git_apply(tree, patch, excluded) if patch.strip() else ""
        report.patch_applied = applied == ""
        if not report.patch_applied:
            report.flags.append(Flag.PATCH_FAILED)
            report.log_tail = applied[-2000:]
            return False
        report.changed = changed
        problem = _git_apply(tree, task.test_patch, []) if task.test_patch.strip() else ""
        if problem:
            report.invalidate(f"the task's test_patch does not apply: {problem[-500:]}")
            return False
        return True

    def _run_tests(self, task: Task, tree: Path, report: GradingReport) -> str:
        env = task.environment
        # `python` and `pytest` are this interpreter's: the one the tests of repogym run with
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        command = f"{env.test_cmd} {shlex.join(test_files(task))}"
        started = time.monotonic()
        try:
            proc = subprocess.run(["bash", "-c", command], cwd=tree, capture_output=True,
                                  env={**os.environ, **TEST_ENV, "PATH": path},
                                  timeout=self.config.timeout or env.timeout)
            log = (proc.stdout + proc.stderr).decode("utf-8", errors="replace")
            report.exit_code = proc.returncode
        except subprocess.TimeoutExpired as exc:
            log = (exc.stdout or b"").decode("utf-8", errors="replace")
            report.timed_out = True
            report.invalidate("the test run hit its time limit", Flag.TIMEOUT)
        report.test_seconds = time.monotonic() - started
        report.log_tail = log[-4000:]
        return log


def _compiles(tree: Path, files: list[str]) -> bool:
    """Whether every Python file the agent changed compiles (none of its code runs)."""
    for path in files:
        try:
            compile((tree / path).read_bytes(), path, "exec")
        except FileNotFoundError:
            continue  # deleted by the patch
        except (SyntaxError, ValueError, OSError):
            return False
    return True


def _git_apply(tree: Path, patch: str, options: list[str]) -> str:
    """Applies ``patch`` in ``tree``; returns git's complaint, empty when it applied."""
    try:
        git(tree, "apply", "--binary", "--whitespace=nowarn", *options, "-",
            input=patch.encode("utf-8", errors="surrogateescape"))
    except TaskError as exc:  # git's message is the report's log
        return str(exc)
    return ""


def judge(task: Task, statuses: dict[str, str], report: GradingReport) -> None:
    """The verdict from the log's statuses: every expected test collected, every
    FAIL_TO_PASS test an explicit pass, swebench's status RESOLVED_FULL."""
    missing = scoring.expected(report, task, statuses, statuses)
    scoring.score(report, task, statuses, missing)
