"""One grading run of a pytest task in one grading container: staging (one script, two when a
setup file must be judged by content), the test run, the decoy run, the results (one script),
and the verdict. The scripts go to the container's root runner.

See the manual's "Grading and safety" (docs/safety.md) for what each step defends.
"""

from __future__ import annotations

import functools
import json
import re
import secrets
import shlex
import time
from typing import TYPE_CHECKING, Any

from repogym.envs.grading import blind, canary, plugins, reporter, stage
from repogym.envs.grading.agreement import run_differential
from repogym.envs.grading.blind import Disguise
from repogym.envs.grading.box import TEST_ENV, GradingBox
from repogym.envs.grading.canary import Canaries
from repogym.envs.grading.checks import (
    COMPILE_FAILED,
    changed_modules,
    compile_check,
    import_check,
    kept_python,
    read_import_marks,
)
from repogym.envs.grading.flags import Protected
from repogym.envs.grading.report import GradingReport
from repogym.envs.grading.reporter import Channel, Records
from repogym.envs.grading.results import parse_log
from repogym.envs.grading.stage import OUT, Staged
from repogym.envs.grading.testcmd import (
    pytest_args,
    runs_pytest,
    runs_tox,
    state_outside,
    test_files,
)
from repogym.envs.grading.verdict import Verdict
from repogym.envs.grading.warm_pytest import WarmPytest, pytest_argv
from repogym.sandbox.base import ExecResult
from repogym.schema import Task

if TYPE_CHECKING:
    from repogym.envs.grading.grader import Grader

TEST_UID = 1000  # the images' unprivileged user, who runs the tests
_JUNIT = "__RG_JUNIT_FOLLOWS"
_SPARE = re.compile(r"^__RG_SPARE=(\d+)$", re.M)


class PytestRun:
    """Grades one patch of a pytest task in ``box``; the verdict goes into ``report``."""

    def __init__(self, grader: Grader, task: Task, box: GradingBox, report: GradingReport,
                 only: tuple[str, ...] = (), by_id: bool = False):
        self.grader, self.task, self.box, self.report = grader, task, box, report
        self.only = only  # task creation: the tests a change reaches (pytest node ids)
        # the test run keeps, of the hidden tests' files, only the task's own ids (a task
        # given with its FAIL_TO_PASS tests alone: certification, ``agents/stripped.py``)
        self.by_id = by_id
        self.pytest = runs_pytest(task.environment)
        # the hidden tests under other names, and the decoy run: the grader's setting, unless
        # validation found the task's tests need their own names (``environment.disguise``)
        self.disguising = grader.config.disguise and task.environment.disguise
        self.changed: list[str] = []
        # the test run's, the decoy run's, and a second one for the decoy run should its
        # waiting process not survive the test run (it then runs after it, in a new process)
        self.channels = ([Channel(1), Channel(2), Channel(3)]
                         if self.pytest and grader.config.reporter else [])
        self.decoy_channel = 1  # index of the decoy run's channel
        self.off = blind.env_off(grader.rng)  # the test run's variable: decoys stay originals
        self.hidden: list[str] = []  # the decoys' ids: FAIL_TO_PASS and the drawn PASS_TO_PASS
        self.disguise: Disguise | None = None
        # the -p plugins: the configuration's addopts', and those the image installed
        self.plugins: list[str] = []
        self.records: list[Records] = []
        # a second waiting pytest for the decoy run, spared when the test run's processes end
        decoy = box.decoy_pytest
        self.spare = (decoy if self.channels and self.disguising and decoy is not None
                      and decoy.wait_ready(0) and decoy.pid else None)
        self.spare_start = ""  # its start time, read before any of the agent's code ran
        # the decoy run collecting while the test run goes on (in the spare), once started
        self.decoy: WarmPytest | None = None
        self.overlap = self._overlap()
        self.asked: WarmPytest | None = None  # the warm process whose exit status is asked

    def root(self, script: str, timeout: float = 120, data: bytes = b"",
             end_user: bool = False) -> tuple[int, str]:
        """Runs ``script`` as root; with ``end_user``, after every process of the tests' user
        ended (the runner does it without forking: a fork bomb in the tests cannot stop it)."""
        spare = self.spare.pid if self.spare is not None else None
        result = self.box.runner.run(script, data, timeout,
                                     end_user=TEST_UID if end_user else None, spare=spare)
        return result.exit_code, result.output

    def end_user(self) -> None:
        # ending a fork bomb's processes takes well under a second on an idle machine, but
        # past a minute with the machine's load in the hundreds (two certification runs lost
        # the runner at 30 s): the limit only waits when the passes are that slow
        self.root(":", timeout=120, end_user=True)

    def end_at_limit(self) -> None:
        """The test run hit its time limit: every process of the tests' user ends, the spare's
        too (a timed-out test run has no decoy run after it, and a decoy run under way has run
        the agent's code: it may be what holds the container's process slots)."""
        self.decoy, self.spare = None, None
        self.end_user()

    def grade(self, patch: str) -> None:
        with self.report.timed("stage"):
            # the image's own pytest plugins, read before anything of the agent's is staged
            installed = plugins.installed(self.box, self.report.image) if self.pytest else ()
            canaries = self.stage(patch)
        # no known test files: the whole suite runs, and discovery finds the canaries too
        # (the planter names them on the command line only where that narrows nothing)
        extra = canaries.args if canaries else []
        installed = plugins.unshadowed(installed, stage.patch_paths(patch))
        self.plugins = [*(canaries.plugin_args if canaries else []), *plugins.plugin_args(
            installed, canaries.blocked if canaries else ())]
        if self.only:  # task creation: the tests a change reaches, and the canary's file
            files = [*self.only, *([canaries.path] if canaries else [])]
        elif self.disguise is not None:
            files = self.disguise.run_args(self.test_files(), extra, self.grader.rng)
        else:
            files = self.test_files() + extra
        log, junit = self.run_tests(files)
        if self.disguise is not None and self.disguise.active and not self.report.timed_out:
            self.decoy_run()
        with self.report.timed("score"):
            # the tests' user ended
            self.report.differential = run_differential(self.box, self.task)
            self.judge(log, junit, canaries)

    def test_files(self) -> list[str]:
        return test_files(self.task)

    # --- 1. staging: the agent's diff minus what it may not touch, test patch, canaries ------

    def stage(self, patch: str) -> Canaries | None:
        predicted = stage.patch_paths(patch)
        task_tests = frozenset(stage.header_paths(self.task.test_patch)) | set(
            self.task.environment.test_files)
        stripped = stage.protected_by_name(predicted, task_tests)
        plant = self.pytest and self.grader.config.canaries
        # task creation's runs of a few tests (``only``) check the repository's own code, not
        # an agent's: nothing to hide them from
        hide = plant and self.disguising and not self.only
        staged, out = self._apply(patch, predicted, stripped, plant, hide)
        stage.record(self.report, staged, predicted, stripped)
        if staged.applied:
            self.changed = list(predicted)
        return self._planted(staged.canary, out, hide) if plant else None

    def _apply(self, patch: str, predicted: list[str], stripped: dict[str, Protected],
               plant: bool, hide: bool) -> tuple[Staged, str]:
        """Runs the staging script, in two parts when a setup file must be judged by content
        (``stripped`` then gains the files whose pytest settings changed); returns what the
        script reported and its output."""
        checked = stage.content_checked(predicted, stripped)
        files = self.test_files()
        prelude = self._prelude()

        opened = opened_dirs(files) if self.task.environment.tests_write else []

        def finish() -> str:  # built once stripped is final
            return stage.finish_script(sorted(stripped), plant, files, protected_dirs(files),
                                       prelude, opened)

        staged, out = stage.run_staging(self.root, self._upload(patch, files, plant, hide),
                                        patch, checked, stripped, finish,
                                        functools.partial(stage.config_changed, tox=runs_tox(
                                            self.task.environment.test_cmd)), "pytest_config")
        found = _SPARE.search(out)
        self.spare_start = found.group(1) if found else ""
        return staged, out

    def _upload(self, patch: str, files: list[str], plant: bool, hide: bool) -> bytes:
        """The patches, and with ``plant`` the planter and its request (where the canaries go
        and, with ``hide``, the hidden tests' new names), and the reporter's files."""
        task = self.task
        upload = {"agent.patch": patch, "test.patch": task.test_patch}
        if plant:
            upload["plant.py"] = canary.planter_source()
            upload["disguise.py"] = canary.disguise_source()
            upload["canary.json"] = canary.request(
                pytest_args(task.environment.test_cmd) or [], files,
                stage.header_paths(task.test_patch), self.grader.rng,
                self._hide_request() if hide else None)
        if self.channels:
            upload.update(reporter.upload())
        return stage.upload(upload)

    def _hide_request(self) -> dict[str, Any]:
        """The disguise's part of the planter's request; keeps the hidden ids (the decoys')."""
        request = blind.planter_request(list(self.task.FAIL_TO_PASS), self.grader.rng,
                                        self.task.PASS_TO_PASS, self.off,
                                        self.grader.config.decoy_p2p)
        self.hidden = list(request["hidden"])
        return request

    def _prelude(self) -> str:
        """What staging runs first: the reporter's collector, and the decoy run's waiting
        process's start time (read before any of the agent's code ran)."""
        prelude = self.channels[0].start_script() if self.channels else ""
        if self.overlap:  # the decoy run's collector too: it starts with the test run
            prelude += self.channels[1].start_script()
        if self.spare is not None and self.spare.pid is not None:
            prelude += (_start_time(self.spare.pid, "__rg_spare")
                        + 'printf "__RG_SPARE=%s\\n" "$__rg_spare"\n')
        return prelude

    def _planted(self, marker: str | None, output: str, hide: bool) -> Canaries | None:
        planted = canary.read_planted(marker, output)
        if planted.canaries is None:
            # no canary, no proof that the runner was left alone: the run cannot count
            self.report.canary_note = planted.error
            self.report.invalidate(f"canaries could not be planted: {planted.error}")
            return None
        self.report.canary_note = f"{planted.canaries.path} ({planted.canaries.note})"
        if hide:
            try:
                self.disguise = Disguise.read(planted.disguise)
                self.report.disguised = dict(self.disguise.renamed)
            except ValueError as exc:  # the hidden tests could be singled out: cannot count
                self.report.invalidate(str(exc))
        return planted.canaries

    # --- 2. the test run (and the decoy run collecting meanwhile) ----------------------------

    def _overlap(self) -> bool:
        """Whether the decoy run goes with the test run: both in pytest imported ahead of
        time, each with its own reporter channel, and the hidden tests disguised."""
        config = self.grader.config
        return (self.spare is not None and bool(self.channels) and not self.only
                and self.disguising and config.canaries and config.decoy_overlap
                and self.box.pytest is not None
                and pytest_argv(self.task.environment.test_cmd) is not None)

    def run_tests(self, files: list[str]) -> tuple[str, str]:
        """The test run, then the results; returns the log and JUnit's XML. With a decoy run
        to make, it starts in the spare at the same time and stops once it has collected."""
        report = self.report
        decoy = self.overlap and self.disguise is not None and self.disguise.active
        start = time.monotonic()
        with report.timed("run"):
            result, report.warm_pytest = self._execute(
                files, self._pytest_options(), changed_modules(self._kept_python()),
                self.box.pytest, self._run_env(), with_decoy=decoy)
        report.test_seconds = time.monotonic() - start
        report.timed_out = result.timed_out
        if result.timed_out and self.decoy is not None:  # no decoy run: it goes too
            self.decoy, self.spare = None, None
        marks = read_import_marks(result.output, result.timed_out)
        report.imports, report.shadowed = marks.imports, marks.shadowed
        report.log_tail = marks.log[-4000:]
        with report.timed("collect"):
            junit = self._after_tests(result.timed_out)
            report.exit_code = self._exit_status(result).exit_code
        return marks.log, junit

    def _run_env(self) -> dict[str, str]:
        """The test run's environment: its variable, with which a decoy imported as a helper
        module is the original file; with ``by_id``, the ids it keeps (as the run names
        them: in the disguised copies)."""
        env = {self.off[0]: self.off[1]} if self.disguise is not None else {}
        if self.by_id and self.channels:
            renamed = self.disguise.renamed if self.disguise is not None else {}
            ids = []
            for test_id in (*self.task.FAIL_TO_PASS, *self.task.PASS_TO_PASS):
                path, sep, rest = test_id.partition("::")
                ids.append(f"{renamed.get(path, path)}{sep}{rest}")
            keep = json.dumps(sorted(set(ids)))
            if len(keep) < 65536:
                env[reporter.KEEP_IDS_VAR] = keep
        return env

    def _pytest_options(self) -> list[str]:
        if not self.pytest:
            return []
        # a file that does not collect does not stop the run: the canaries still run, and its
        # tests count as errors (the verdict reads the run as pytest's plain run would end)
        return ["-p", "no:cacheprovider", "-o", "addopts=", "-o", "junit_family=xunit1",
                f"--junitxml={OUT}/junit.xml", "--rootdir=/testbed",
                "--continue-on-collection-errors"]

    def _decoy_options(self) -> list[str]:
        # every decoy fails: no traceback of theirs is of use, and formatting them costs
        return ["-p", "no:cacheprovider", "-o", "addopts=", "--rootdir=/testbed",
                "--continue-on-collection-errors", "--tb=no"]

    def _decoy_env(self) -> dict[str, str]:
        """The decoy run's environment: the ids it runs (the harness's plugin keeps, of each
        hidden test function, the cases named; all of them where none is found)."""
        ids = json.dumps(sorted(set(self.hidden)))
        return {reporter.DECOY_IDS_VAR: ids} if self.hidden and len(ids) < 65536 else {}

    def _execute(self, files: list[str], opts: list[str], imports: list[str],
                 warm: WarmPytest | None, env: dict[str, str], with_decoy: bool = False,
                 decoy_run: bool = False) -> tuple[ExecResult, bool]:
        """One run of the task's test command on ``files``: in the pytest imported ahead of
        time when the command is plain pytest (the second value says so), else in a new
        process. ``imports``: the modules the import check tries after the tests; ``env``:
        variables for the run. ``with_decoy``: the decoy run starts in the spare at the same
        time (both wait until both plugins took their keys) and stops once it has collected
        (``decoy_run`` lets it go on). ``decoy_run``: this is the decoy run, after the test
        run."""
        cmd = self.task.environment
        config = self.grader.config
        timeout = config.timeout or cmd.timeout
        plain = pytest_argv(cmd.test_cmd) if self.pytest else None
        if self.channels:
            opts = [*opts, *reporter.pytest_options(cmd.assertion_pass_hook)]
        # the configuration's own plugins come after the reporter: no code of the repository
        # may run before it has read its key
        opts = [*opts, *self.plugins]
        if warm is not None and plain is not None and warm.wait_ready(10.0):
            form, args = plain
            plugin = ((reporter.PLUGIN, f"{reporter.PLUGIN_DIR}/{reporter.PLUGIN}.py")
                      if self.channels else None)
            decoy = self.spare if with_decoy else None
            # the decoy run's process is not waited for past pytest's return (``finish``)
            warm.send([*args, *opts, *files], form, imports, plugin, env,
                      hold=decoy is not None, done=secrets.token_hex(8) if decoy_run else "")
            if decoy is not None:
                assert self.disguise is not None
                decoy_opts = [*self._decoy_options(),
                              *reporter.pytest_options(cmd.assertion_pass_hook), *self.plugins]
                named = self.disguise.decoy_args(self.grader.rng)
                decoy.send([*args, *decoy_opts, *named], form, [], plugin,
                           {**self.channels[1].env(), **self._decoy_env()}, hold=True,
                           gate=True, done=secrets.token_hex(8))
                # neither process runs code of the repository before both took their keys
                if warm.loaded(60.0) and decoy.loaded(60.0):
                    self.decoy = decoy
                else:  # the test run's end takes it too; the decoy run comes after, anew
                    self.spare = None
                decoy.go()
                warm.go()
            self.asked = warm
            return warm.finish(self.box, timeout, config.log_limit,
                               self.end_user if decoy_run else self.end_at_limit,
                               code_later=True), True
        command = f"{state_outside(cmd.test_cmd)} {shlex.join(opts)} {shlex.join(files)}"
        exports = dict(env)
        if self.channels:
            command = f"export {reporter.env_assignment()}; {command}"
        if exports:
            command = (f"export {' '.join(f'{k}={shlex.quote(v)}' for k, v in exports.items())}"
                       f"; {command}")
        # the import check runs after the tests, in the same exec; the exit status stays
        # pytest's
        command = f"{command}; __rc=$?; {import_check(imports, cmd.test_cmd)} exit $__rc"
        return self.box.exec(
            ["env", *(f"{k}={v}" for k, v in TEST_ENV.items()), "bash", "-c", command],
            timeout=timeout, limit=config.log_limit,
        ), False

    def _after_tests(self, timed_out: bool) -> str:
        """Root, once every process of the tests' user ended (nothing the tests left behind may
        write to the results after this point) but the decoy run's: the compile check, the
        reporter's records, the decoy run's channel; returns JUnit's XML."""
        _, out = self.root(f"{compile_check(self._kept_python())}echo; "
                           f"{self._after_script(timed_out)}echo {_JUNIT}; "
                           f"cat {OUT}/junit.xml 2>/dev/null", timeout=60, end_user=True)
        compiled, _, rest = out.partition("\n")
        before, _, junit = rest.partition(f"{_JUNIT}\n")
        self.report.compiles = compiled.strip() != COMPILE_FAILED
        if "__RG_SPARE_OK" not in before:
            self.spare = None
        if self.spare is None:  # gone, or never started: the decoy run comes anew
            self.decoy = None
        if self.overlap:  # its own channel, or a new one for the new process
            self.decoy_channel = 1 if self.decoy is not None else 2
        if self.channels:
            self.records.append(self.channels[0].read(before))
        return junit

    def _after_script(self, timed_out: bool) -> str:
        after = ""
        if self.channels:
            after += self.channels[0].stop_script()
        active = self.disguise is not None and self.disguise.active
        stop = self.channels[1].stop_script() if self.channels and self.overlap else ""
        if not self.channels or not active or timed_out:
            return after + stop
        if self.overlap and self.decoy is not None and self.spare is not None:
            # the same process as before the tests, or none (and the decoy run anew)
            return after + (
                self._spare_check() + "then echo __RG_SPARE_OK; else "
                f"kill -9 {self.spare.pid} 2>/dev/null\n"
                + self.channels[1].stop_script() + self.channels[2].start_script() + "fi\n")
        # the decoy run comes after the test run: its channel now, and in the spare (the same
        # process as before the tests) or a new process
        after += stop + self.channels[2 if self.overlap else 1].start_script()
        if not self.overlap and self.spare is not None:
            after += (self._spare_check() + "then echo __RG_SPARE_OK; else "
                      f"kill -9 {self.spare.pid} 2>/dev/null; fi\n")
        return after

    def _spare_check(self) -> str:
        """The start of a shell ``if``: the spare is the process that waited before staging."""
        assert self.spare is not None and self.spare.pid is not None
        return (_start_time(self.spare.pid, "__rg_now")
                + f'if [ -n "$__rg_now" ] && [ "$__rg_now" = "{self.spare_start}" ]; ')

    def _exit_status(self, result: ExecResult) -> ExecResult:
        """``result`` with its exit status: a warm process's is asked of the engine while the
        next root script runs (``WarmPytest.finish``'s ``code_later``)."""
        asked, self.asked = self.asked, None
        return asked.exit_status(result) if asked is not None else result

    def _kept_python(self) -> list[str]:
        return kept_python(self.changed, self.report.stripped)

    # --- 3. the decoy run ----------------------------------------------------------------------

    def decoy_run(self) -> None:
        """The decoys (the hidden tests' files at their own paths, every hidden test failing
        after it ran): the spare that collected them while the test run went on runs them now,
        or a new test process does; see ``blind.py``."""
        assert self.disguise is not None
        config = self.grader.config
        timeout = config.timeout or self.task.environment.timeout
        channel = self.channels[self.decoy_channel] if self.channels else None
        # its turn: the next end of the user takes it too
        spare, self.spare = (None if self.overlap else self.spare), None
        with self.report.timed("decoy"):
            if self.decoy is not None:
                self.decoy.go()
                self.asked = self.decoy
                result = self.decoy.finish(self.box, timeout, config.log_limit, self.end_user,
                                           code_later=True)
                self.report.decoy_warm = True
                self.report.decoy_seconds = time.monotonic() - self.decoy.started
            else:
                start = time.monotonic()
                result, self.report.decoy_warm = self._execute(
                    self.disguise.decoy_args(self.grader.rng), self._decoy_options(), [], spare,
                    {**(channel.env() if channel is not None else {}), **self._decoy_env()},
                    decoy_run=True)
                self.report.decoy_seconds = time.monotonic() - start
        with self.report.timed("collect"):
            _, out = self.root(channel.stop_script() if channel is not None else ":",
                               timeout=60, end_user=True)
            result = self._exit_status(result)
        records = channel.read(out) if channel is not None else Records(ended=True)
        if channel is not None:
            self.records.append(records)
        self._judge_decoys(result, records)

    def _judge_decoys(self, result: ExecResult, records: Records) -> None:
        assert self.disguise is not None
        log = parse_log(result.output, self.task.environment.log_parser)
        statuses = dict(records.statuses) if self.channels else dict(log)
        # a pass the log claims and the records do not counts against the decoys as well
        statuses.update({k: v for k, v in log.items() if v == "PASSED"})
        self.report.decoys = statuses
        problems = self.disguise.decoy_problems(
            statuses, records.collection_errors + records.skipped_modules)
        if result.timed_out:
            problems.append("the decoy run hit its time limit")
        elif result.exit_code == 0:
            problems.append("the decoy run exited 0 although every decoy fails")
        if problems:
            self.report.invalidate("; ".join(problems[:5]), blind.FLAG)

    # --- 4. the verdict ------------------------------------------------------------------------

    def judge(self, log: str, junit_xml: str, canaries: Canaries | None) -> None:
        Verdict(self.report, self.task, self.pytest, self.records, self.disguise).judge(
            log, junit_xml, canaries)


def protected_dirs(test_files: list[str]) -> list[str]:
    """/testbed and every folder on the way to a test file: no new conftest.py there (the
    planter does the same for the canary's folders)."""
    dirs = {"."}
    for path in test_files:
        parts = path.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            dirs.add("/".join(parts[:i]))
    return sorted(dirs)


def opened_dirs(test_files: list[str]) -> list[str]:
    """The folders a task's tests may write in (``environment.tests_write``): /testbed and
    each test module's own folder. The folders between stay closed."""
    return sorted({"."} | {path.rpartition("/")[0] for path in test_files if "/" in path})


def _start_time(pid: int, var: str) -> str:
    """Shell (builtins only) that sets ``var`` to the start time of process ``pid`` (empty when
    there is none): with its id, it names one process, never one that took its id later."""
    return (f"{var}=; __rg_stat=; read -r __rg_stat < /proc/{int(pid)}/stat 2>/dev/null && "
            f"{{ __rg_stat=${{__rg_stat##*) }}; set -- $__rg_stat; {var}=${{20:-}}; }}\n")
