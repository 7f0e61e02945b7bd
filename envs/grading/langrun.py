"""One grading run for a repository whose tests are not pytest's (``runners``).

The same guarantees as for pytest, in the same order: the agent's diff applied in a fresh
container with its changes to tests, runner configuration and build settings removed and
flagged (``protect_langs``), the task's test patch, a canary file in the repository's test
language (one test must pass, one must fail), test files locked root's, one harness-owned run
as the tests' user with a time limit and no network, then two result sources that must agree:
the runner's machine-readable output and swebench's log parser on the console log. Only
explicit passes count; the exit status must agree with the results.
"""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from repogym.envs.grading import scoring, stage
from repogym.envs.grading.flags import Flag, Protected
from repogym.envs.grading.protect_langs import config_changed, content_checked, protected_reason
from repogym.envs.grading.report import GradingReport
from repogym.envs.grading.results import PASSING, parse_log
from repogym.envs.grading.runners import Canary, TestRunner, get_runner, runner_name
from repogym.envs.grading.runners.language import conflicts, seen
from repogym.envs.grading.stage import Staged
from repogym.sandbox.base import HarnessSandbox
from repogym.schema import Task

if TYPE_CHECKING:
    from repogym.envs.grading.grader import Grader

OUT = stage.OUT
_FILE = re.compile(r"^__RG_FILE (\S+) (\S*)$", re.M)
MAX_RESULT_BYTES = 20_000_000


class RunAsRoot(Protocol):
    """Runs a script in the grading container as root (the grader's root runner); with
    ``end_user``, after every process of the tests' user ended. Returns (exit code, output)."""

    def __call__(self, script: str, timeout: float = 120, data: bytes = b"",
                 end_user: bool = False) -> tuple[int, str]: ...


class LangRun:
    """Grades one patch with a language runner; ``root`` runs a script in the container as root
    (the grader's root runner), ``box`` is the grading container."""

    def __init__(self, grader: Grader, task: Task, box: HarnessSandbox, report: GradingReport,
                 root: RunAsRoot, end_user: Callable[[], None]):
        self.grader, self.task, self.box, self.report = grader, task, box, report
        self.root, self.end_user = root, end_user
        name = runner_name(task.environment)
        assert name is not None
        self.runner: TestRunner = get_runner(name)
        self.language = task.environment.language

    def grade(self, patch: str) -> None:
        with self.report.timed("stage"):
            canary = self.stage(patch)
        log, outputs = self.run(self.test_files() + ([canary.path] if canary else []))
        with self.report.timed("score"):
            self.judge(log, outputs, canary)

    def test_files(self) -> list[str]:
        return task_test_files(self.task)

    # --- staging ---------------------------------------------------------------------------

    def stage(self, patch: str) -> Canary | None:
        """The agent's patch minus what it may not change, the task's test patch and the
        canary, in the container; the report says what was applied and what was removed."""
        predicted = stage.patch_paths(patch)
        stripped = self._protected_by_name(predicted)
        files = self.test_files()
        canary = (self.runner.canary(files, self.grader.rng) if self.grader.config.canaries
                  else None)
        staged, out = self._apply(patch, predicted, stripped, files, canary)
        stage.record(self.report, staged, predicted, stripped)
        return self._planted(canary, out)

    def _protected_by_name(self, predicted: list[str]) -> dict[str, Protected]:
        """The paths the patch changes that the agent may not change, with the reason."""
        task_tests = set(stage.header_paths(self.task.test_patch)) | set(
            self.task.environment.test_files)
        stripped: dict[str, Protected] = {}
        for path in predicted:
            reason: Protected | None = ("task_test_file" if path in task_tests
                                        else protected_reason(path, self.language))
            if reason:
                stripped[path] = reason
        return stripped

    def _apply(self, patch: str, predicted: list[str], stripped: dict[str, Protected],
               files: list[str], canary: Canary | None) -> tuple[Staged, str]:
        """Runs the staging script, in two parts when a build file must be judged by content
        (``stripped`` then gains the files whose test settings changed); returns what the
        script reported and its output."""
        checked = [p for p in predicted if content_checked(p, self.language)
                   and p not in stripped]
        upload = stage.upload({"agent.patch": patch, "test.patch": self.task.test_patch})
        dirs = sorted({"."} | {f.rpartition("/")[0] for f in files if "/" in f})
        plant = (f"cd /testbed && if [ ! -e {canary.path!r} ]; then ( {canary.script} ) && "
                 "echo __RG_PLANTED=1; fi\n") if canary else ""

        def finish() -> str:  # built once stripped is final
            return stage.finish_script(sorted(stripped), False, files, dirs) + plant

        return stage.run_staging(self.root, upload, patch, checked, stripped, finish,
                                 config_changed, "runner_config")

    def _planted(self, canary: Canary | None, out: str) -> Canary | None:
        if canary is None:
            return None
        if "__RG_PLANTED=1" not in out:
            self.report.invalidate(f"the canary could not be planted at {canary.path}")
            return None
        return canary

    # --- the run -----------------------------------------------------------------------------

    def run(self, files: list[str]) -> tuple[str, dict[str, str]]:
        env = self.task.environment
        timeout = self.grader.config.timeout or env.timeout
        command = self.runner.command(env, files)
        start = time.monotonic()
        with self.report.timed("run"):
            result = self.box.exec(run_argv(command), timeout=timeout,
                                   limit=self.grader.config.log_limit)
        self.report.test_seconds = time.monotonic() - start
        self.report.exit_code = result.exit_code
        self.report.timed_out = result.timed_out
        self.report.log_tail = result.output[-4000:]
        # every process of the tests' user ends before the results are read
        with self.report.timed("collect"):
            _, out = self._read_outputs()
        outputs = {}
        for name, data in _FILE.findall(out):
            key = base64.b64decode(name).decode("utf-8", "replace")
            outputs[key] = base64.b64decode(data).decode("utf-8", "replace")
        return result.output, outputs

    def _read_outputs(self) -> tuple[int, str]:
        return self.root(
            f"cd {OUT} 2>/dev/null && find . -type f | sed 's|^\\./||' | while read -r f; do "
            f"printf '__RG_FILE %s %s\\n' \"$(printf %s \"$f\" | base64 -w0)\" "
            f"\"$(head -c {MAX_RESULT_BYTES} \"$f\" | base64 -w0)\"; done; true",
            timeout=120, end_user=True)

    # --- the verdict ---------------------------------------------------------------------------

    def judge(self, log: str, outputs: dict[str, str], canary: Canary | None) -> None:
        statuses, view = self._statuses(log, outputs, canary)
        self._check_canary(view, canary)
        report = self.report
        if report.timed_out:
            report.invalidate("the test run hit its time limit", Flag.TIMEOUT)
        elif report.exit_code is not None and statuses:
            problem = self.runner.exit_problem(report.exit_code, statuses)
            if problem:
                report.invalidate(problem, Flag.EXIT_STATUS)
        missing = self._expected(statuses, view, canary)
        self._score(view, missing)

    def _statuses(self, log: str, outputs: dict[str, str],
                  canary: Canary | None) -> tuple[dict[str, str], dict[str, str]]:
        """(the runner's machine-readable statuses, the same under swebench's log names too),
        both empty when they disagree with the log or with themselves."""
        report, task, runner = self.report, self.task, self.runner
        machine = runner.parse(outputs, log)
        log_status = parse_log(log, runner.log_parser)
        log_seen = every_status(log, runner.log_parser)
        report.compiles = runner.built(log, machine)
        expected = [*task.FAIL_TO_PASS, *task.PASS_TO_PASS] + (list(canary.ids) if canary else [])
        mismatch = sorted(set(cross_check(machine, log_status, expected, runner, log_seen))
                          | conflicts(machine))
        statuses = machine
        if mismatch:
            report.invalidate(f"the runner's results disagree with its log or with themselves "
                              f"on {mismatch[:5]}", Flag.REPORT_MISMATCH)
            statuses = {}
        return statuses, with_log_keys(statuses, runner)

    def _check_canary(self, view: dict[str, str], canary: Canary | None) -> None:
        if not canary:
            return
        self.report.canaries = {t: view.get(t, "MISSING") for t in canary.ids}
        problems = [f"canary {t} expected {want}, got {view.get(t, 'MISSING')}"
                    for t, want in canary.ids.items() if view.get(t) != want]
        if problems:
            self.report.invalidate("; ".join(problems), Flag.CANARY)

    def _expected(self, statuses: dict[str, str], view: dict[str, str],
                  canary: Canary | None) -> list[str]:
        return scoring.expected(self.report, self.task, statuses, view,
                                set(canary.ids) if canary else set(), not_run="were not run")

    def _score(self, view: dict[str, str], missing: list[str]) -> None:
        # these statuses come from the runner's own reports: every listed test must pass
        scoring.score(self.report, self.task, view, missing, explicit_p2p=True)


def task_test_files(task: Task) -> list[str]:
    """The files a language runner is given: the task's ``test_files``, else those its test
    patch touches."""
    return sorted(dict.fromkeys(list(task.environment.test_files)
                                or stage.header_paths(task.test_patch)))


def run_argv(command: str) -> list[str]:
    """The test run's command line. Its stderr goes into its stdout inside the container: docker
    reads the two pipes of an exec apart and interleaves what it read, so a line that cargo
    writes to stderr in pieces (``     Running``, then the target) could land in the middle of a
    ``test NAME ... ok`` line on stdout, and the log parser would lose that test (under load:
    ``demo__runlength-1``, whose results then disagreed with the runner's logfiles)."""
    return ["bash", "-c", f"exec 2>&1; cd /testbed && {command}"]


def with_log_keys(statuses: dict[str, str], runner: TestRunner) -> dict[str, str]:
    """``statuses`` plus each test under the name swebench's parser gives it (SWE-bench
    Multilingual's lists use those): a name shared by several tests passes only if all do."""
    view = dict(statuses)
    grouped: dict[str, list[str]] = {}
    for test_id, status in statuses.items():
        grouped.setdefault(runner.log_key(test_id), []).append(status)
    for key, group in grouped.items():
        if key not in view:
            view[key] = "PASSED" if all(s == "PASSED" for s in group) else next(
                s for s in group if s != "PASSED")
    return view


def every_status(log: str, parser: str) -> dict[str, set[str]]:
    """Every status the log gives each test, line by line. swebench's parsers for these runners
    read one line at a time and keep a test's last status, so a pass line printed before the
    real result (code under test writing ``--- PASS: TestX`` when it loads) would vanish from
    their answer; here it stays, and disagrees with the runner's own results."""
    found: dict[str, set[str]] = {}
    for line in log.splitlines():
        for key, status in parse_log(line, parser).items():
            found.setdefault(key, set()).add(status)
    return found


def cross_check(machine: dict[str, str], log: dict[str, str], expected: list[str],
                runner: TestRunner, log_seen: dict[str, set[str]] | None = None) -> list[str]:
    """Tests on which the machine-readable results and the log parser disagree about passing,
    or that only one of them reports. Every test the log or the machine names is compared, the
    expected ones included; a log name several tests share is compared with all of them. With
    ``log_seen`` (``every_status``), a status the log gave a test at any point must be one the
    runner gave it too."""
    by_key: dict[str, list[str]] = {}
    for test_id in machine:
        by_key.setdefault(runner.log_key(test_id), []).append(test_id)
    out = []
    for key in sorted(set(by_key) | set(log)):
        ids = by_key.get(key, [])
        in_log = log.get(key)
        if not ids or in_log is None:
            # a skip the log parser leaves out is no disagreement, nor a file that did not load
            if ids and all(machine[i] in ("SKIPPED", "ERROR") for i in ids):
                continue
            if in_log == "SKIPPED":
                continue
            out.append(key)
            continue
        had = {s in PASSING for i in ids for s in seen(machine).get(i, {machine[i]})}
        claimed = {s in PASSING for s in (log_seen or {}).get(key, set())} | {in_log in PASSING}
        if not claimed <= had:
            out.append(key)
    for test_id in expected:
        key = runner.log_key(test_id)
        if test_id in machine and key not in log and machine[test_id] != "SKIPPED":
            out.append(test_id)
    return sorted(dict.fromkeys(out))
