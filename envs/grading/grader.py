"""The grader: a fresh container from the pristine image, the agent's diff without its test
changes, the task's test patch, canaries, one harness-owned test run, two cross-checked result
sources, and a verdict that only explicit passes can earn.

See the README's "Grading and safety" for what is defended and what is not.
"""

from __future__ import annotations

import json
import random
import re
import shlex
import threading
import time
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any

from repogym.envs.grading import blind, canary, reporter, stage
from repogym.envs.grading.agreement import run_differential
from repogym.envs.grading.blind import Disguise
from repogym.envs.grading.canary import Canaries
from repogym.envs.grading.flags import Flag, tampered_flags
from repogym.envs.grading.langrun import LangRun
from repogym.envs.grading.reporter import Channel, Records
from repogym.envs.grading.results import parse_log
from repogym.envs.grading.runners import runner_name
from repogym.envs.grading.testcmd import pytest_args, runs_pytest
from repogym.envs.grading.verdict import Verdict
from repogym.envs.grading.warm_pytest import IMPORT_CHECK, WarmPytest, pytest_argv
from repogym.envs.sandbox.base import ExecResult, SandboxConfig
from repogym.envs.sandbox.docker import DockerSandbox
from repogym.envs.sandbox.pool import SandboxPool
from repogym.envs.sandbox.runner import Runner
from repogym.errors import RepogymError
from repogym.tasks.schema import Task

G = stage.G
GRADER_CAPS = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL")
TEST_UID = 1000  # the images' unprivileged user, who runs the tests
_IMPORTS = re.compile(r"\n__RG_IMPORTS=(\d)\n")
_SHADOW = re.compile(r"\n__RG_SHADOW=(.*)\n")
_JUNIT = "__RG_JUNIT_FOLLOWS"
TEST_ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1"}


@dataclass
class GradingReport:
    """Everything the grader saw and decided. ``info["grading"]`` is its ``to_dict()``."""

    instance_id: str
    resolved: bool = False
    valid: bool = True
    patch_applied: bool = False
    empty_patch: bool = True
    compiles: bool | None = None
    imports: bool | None = None
    fail_to_pass: dict[str, str] = field(default_factory=dict)
    pass_to_pass: dict[str, str] = field(default_factory=dict)
    f2p_pass_rate: float = 0.0
    p2p_pass_rate: float = 0.0
    stripped: dict[str, str] = field(default_factory=dict)
    changed: list[str] = field(default_factory=list)  # paths the applied patch touches
    flags: list[str] = field(default_factory=list)
    invalid_reasons: list[str] = field(default_factory=list)
    canaries: dict[str, str] = field(default_factory=dict)
    canary_note: str = ""  # where the canaries went and why there, or why there are none
    statuses: dict[str, str] = field(default_factory=dict)
    swebench_status: str = ""
    exit_code: int | None = None
    timed_out: bool = False
    test_seconds: float = 0.0
    total_seconds: float = 0.0
    image: str = ""
    log_tail: str = ""
    differential: dict[str, Any] | None = None  # replication tasks: agreement with the reference
    warm_pytest: bool = False  # the tests ran in the pytest imported ahead of time
    shadowed: list[str] = field(default_factory=list)  # "module:path" imported from elsewhere
    disguised: dict[str, str] = field(default_factory=dict)  # test file: its name in the run
    decoys: dict[str, str] = field(default_factory=dict)  # decoy run: node id: status
    decoy_seconds: float = 0.0
    decoy_warm: bool = False  # the decoy run ran in a second pytest imported ahead of time

    def invalidate(self, reason: str, flag: Flag | None = None) -> None:
        self.valid = False
        self.invalid_reasons.append(reason)
        if flag and flag not in self.flags:
            self.flags.append(flag)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class GraderConfig:
    timeout: float | None = None  # seconds for the test run; the task's own when None
    memory: str = "4g"
    cpus: float = 2.0
    pids_limit: int = 1024
    log_limit: int = 4_000_000
    canaries: bool = True
    disguise: bool = True  # hidden tests under random names, then a decoy run (see blind.py)
    reporter: bool = True  # results over a signed pipe, the equality check (reporter.py)
    cleanup_async: bool = True


class Grader:
    """Grades patches; with a pool, its containers are started ahead of time."""

    def __init__(self, config: GraderConfig | None = None, seed: int | None = None,
                 pool: SandboxPool | None = None):
        self.config = config or GraderConfig()
        self.rng = random.Random(seed)
        self.pool = pool
        if pool is not None:
            pool.on_start["grader"] = prepare_grader

    def container_config(self) -> dict[str, Any]:
        c = self.config
        return {"network": False, "shell": False, "cap_add": GRADER_CAPS, "memory": c.memory,
                "cpus": c.cpus, "pids_limit": c.pids_limit, "output_limit": c.log_limit,
                "tmpfs_size": "512m"}

    def warm(self, image: str) -> None:
        """Starts a grading container for ``image`` in the background (with a pool)."""
        if self.pool is not None:
            self.pool.warm(image, role="grader", **self.container_config())

    def grade(self, task: Task, patch: str, image: str) -> GradingReport:
        report = GradingReport(task.instance_id, image=image, empty_patch=not patch.strip())
        start = time.monotonic()
        if self.pool is not None:
            box = self.pool.acquire(image, role="grader", **self.container_config())
        else:
            box = DockerSandbox(SandboxConfig(image=image, role="grader",
                                              **self.container_config()))
        try:
            run = _Run(self, task, box, report)
            if runner_name(task.environment):  # JavaScript, Go, Rust, Java: ``langrun``
                LangRun(self, task, box, report, run.root, run.end_user).grade(patch)
            else:
                run.grade(patch)
        finally:
            report.total_seconds = time.monotonic() - start
            if self.pool is not None:
                self.pool.release(box)  # graders are never reused: the pool removes it
            elif self.config.cleanup_async:
                threading.Thread(target=_close_quietly, args=(box,), daemon=True).start()
            else:
                box.close()
        return report


class _Run:
    """One grading run in one container: staging (one script, two when a setup file must be
    judged by content), the tests, the results (one script). The scripts go to the container's
    root runner, started with the container when it came from the pool."""

    def __init__(self, grader: Grader, task: Task, box: DockerSandbox, report: GradingReport):
        self.g, self.task, self.box, self.report = grader, task, box, report
        self.pytest = runs_pytest(task.environment)
        self.changed: list[str] = []
        self.channels = ([Channel(1), Channel(2)] if self.pytest and grader.config.reporter
                         else [])
        self.disguise: Disguise | None = None
        self.plugins: list[str] = []  # the -p plugins of the configuration's addopts
        self.records: list[Records] = []
        # a second waiting pytest for the decoy run, spared when the test run's processes end
        decoy: WarmPytest | None = box.attachments.get("pytest_decoy")
        self.spare = (decoy if self.channels and grader.config.disguise and decoy is not None
                      and decoy.wait_ready(0) and decoy.pid else None)
        self.spare_start = ""  # its start time, read before any of the agent's code ran
        if "root" not in box.attachments:
            box.attachments["root"] = Runner.start(box)
        self.runner: Runner = box.attachments["root"]

    def root(self, script: str, timeout: float = 120, data: bytes = b"",
             end_user: bool = False) -> tuple[int, str]:
        """Runs ``script`` as root; with ``end_user``, after every process of the tests' user
        ended (the runner does it without forking: a fork bomb in the tests cannot stop it)."""
        spare = self.spare.pid if self.spare is not None else None
        result = self.runner.run(script, data, timeout, end_user=TEST_UID if end_user else None,
                                 spare=spare)
        return result.exit_code, result.output

    def end_user(self) -> None:
        self.root(":", timeout=30, end_user=True)

    def grade(self, patch: str) -> None:
        canaries = self.stage(patch)
        # no known test files: the whole suite runs, and discovery finds the canaries too
        # (the planter names them on the command line only where that narrows nothing)
        extra = canaries.args if canaries else []
        self.plugins = canaries.plugin_args if canaries else []
        if self.disguise is not None:
            files = self.disguise.run_args(self.test_files(), extra, self.g.rng)
        else:
            files = self.test_files() + extra
        log, junit = self.run_tests(files)
        if self.disguise is not None and self.disguise.active and not self.report.timed_out:
            self.decoy_run()
        self.report.differential = run_differential(self.box, self.task)  # the tests' user ended
        self.judge(log, junit, canaries)

    # --- 1. staging: the agent's diff minus what it may not touch, test patch, canaries ------

    def stage(self, patch: str) -> Canaries | None:
        r = self.report
        nonempty = bool(patch.strip())
        predicted = stage.patch_paths(patch)
        task_tests = frozenset(stage.header_paths(self.task.test_patch)) | set(
            self.task.environment.test_files)
        stripped = stage.protected_by_name(predicted, task_tests)
        checked = stage.content_checked(predicted, stripped)
        test_files = self.test_files()
        plant = self.pytest and self.g.config.canaries
        hide = plant and self.g.config.disguise
        files = {"agent.patch": patch, "test.patch": self.task.test_patch}
        if plant:
            files["plant.py"] = canary.planter_source()
            files["disguise.py"] = canary.disguise_source()
            files["canary.json"] = canary.request(
                pytest_args(self.task.environment.test_cmd) or [], test_files,
                stage.header_paths(self.task.test_patch), self.g.rng,
                blind.planter_request(list(self.task.FAIL_TO_PASS), self.g.rng) if hide else None)
        if self.channels:
            files.update(reporter.upload())
        upload = stage.upload(files)
        first = stage.apply_script(nonempty, checked)
        prelude = self.channels[0].start_script() if self.channels else ""
        if self.spare is not None and self.spare.pid is not None:
            prelude += (_start_time(self.spare.pid, "__rg_spare")
                        + 'printf "__RG_SPARE=%s\\n" "$__rg_spare"\n')
        finish = lambda: stage.finish_script(  # noqa: E731 - built once stripped is final
            sorted(stripped), plant, test_files, self._protected_dirs(test_files), prelude)
        if checked:  # the host must read those files before it knows what to strip
            code, out = self.root(first, data=upload)
            staged = stage.parse(out, checked)
            for path in checked:
                if staged.applied and stage.config_changed(path, *staged.contents[path]):
                    stripped[path] = "pytest_config"
            code, out2 = self.root(stage.resume_header(staged.applied) + finish())
            out += out2
            staged = stage.parse(out, checked)
        else:
            code, out = self.root(first + finish(), data=upload)
            staged = stage.parse(out, checked)
        stage.require_done(staged, out)
        found = re.search(r"^__RG_SPARE=(\d+)$", out, re.M)
        self.spare_start = found.group(1) if found else ""
        r.patch_applied = staged.applied
        if not staged.applied:
            r.flags.append(Flag.PATCH_FAILED)
            r.log_tail = staged.apply_log[-2000:]
            stripped = {}
        else:
            self.changed = r.changed = list(predicted)
            unseen = sorted(set(staged.container_paths) - set(predicted))
            if unseen:
                r.invalidate(f"the grading container's git reads paths the host did not: "
                             f"{unseen[:5]}", Flag.PATCH_MISMATCH)
        r.stripped = stripped
        r.flags += tampered_flags(stripped)
        return self._planted(staged.canary, out, hide) if plant else None

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

    def _protected_dirs(self, test_files: list[str]) -> list[str]:
        """/testbed and every folder on the way to a test file: no new conftest.py there (the
        planter does the same for the canary's folders)."""
        dirs = {"."}
        for path in test_files:
            parts = path.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                dirs.add("/".join(parts[:i]))
        return sorted(dirs)

    def test_files(self) -> list[str]:
        return test_files(self.task)

    # --- 3. the run ----------------------------------------------------------------------------

    def run_tests(self, files: list[str]) -> tuple[str, str]:
        opts: list[str] = []
        if self.pytest:
            opts = ["-p", "no:cacheprovider", "-o", "addopts=", "-o", "junit_family=xunit1",
                    f"--junitxml={G}/out/junit.xml", "--rootdir=/testbed"]
        start = time.monotonic()
        result, self.report.warm_pytest = self._execute(
            files, opts, self._modules(), self.box.attachments.get("pytest"))
        self.report.test_seconds = time.monotonic() - start
        self.report.exit_code = result.exit_code
        self.report.timed_out = result.timed_out
        # only the marker line leaves the log: what code under test printed after it (at exit)
        # is checked like everything else
        marks = list(_IMPORTS.finditer(result.output))
        log = result.output
        if marks:
            last = marks[-1]
            log = log[: last.start()] + "\n" + log[last.end() :]
            if not result.timed_out:
                self.report.imports = last.group(1) == "0"
            shadow = list(_SHADOW.finditer(log))
            if shadow:  # a diagnosis only: nothing here decides a reward
                log = log[: shadow[-1].start()] + "\n" + log[shadow[-1].end() :]
                self.report.shadowed = shadow[-1].group(1).split()
        self.report.log_tail = log[-4000:]
        # nothing the tests left behind may write to the results after this point; the compile
        # check is root's too (compiling runs none of the agent's code). The decoys replace the
        # test files in the same script.
        after = ""
        if self.channels:
            after += self.channels[0].stop_script()
        if self.disguise is not None and self.disguise.active and not result.timed_out:
            after += self.disguise.swap_script()
            after += self.channels[1].start_script() if self.channels else ""
            if self.spare is not None and self.spare.pid is not None:
                # the same process as before the tests, or none
                after += (_start_time(self.spare.pid, "__rg_now")
                          + f'[ -n "$__rg_now" ] && [ "$__rg_now" = "{self.spare_start}" ] '
                          f'&& echo __RG_SPARE_OK || kill -9 {self.spare.pid} 2>/dev/null\n')
        _, out = self.root(f"{self._compile_check()}echo; {after}echo {_JUNIT}; "
                           f"cat {G}/out/junit.xml 2>/dev/null", timeout=60, end_user=True)
        compiled, _, rest = out.partition("\n")
        before, _, junit = rest.partition(f"{_JUNIT}\n")
        self.report.compiles = compiled.strip() != "COMPILE_FAILED"
        if "__RG_SPARE_OK" not in before:
            self.spare = None
        if self.channels:
            self.records.append(self.channels[0].read(before))
        return log, junit

    def decoy_run(self) -> None:
        """The decoys (the hidden tests' files at their own paths, every hidden test failing
        after it ran) in a new test process; see ``blind.py``."""
        assert self.disguise is not None
        opts = ["-p", "no:cacheprovider", "-o", "addopts=", "--rootdir=/testbed",
                "--continue-on-collection-errors"]
        start = time.monotonic()
        warm, self.spare = self.spare, None  # its turn: the next end of the user takes it too
        result, self.report.decoy_warm = self._execute(
            self.disguise.decoy_args(self.g.rng), opts, [], warm)
        self.report.decoy_seconds = time.monotonic() - start
        _, out = self.root(self.channels[1].stop_script() if self.channels else ":",
                           timeout=60, end_user=True)
        records = self.channels[1].read(out) if self.channels else Records(ended=True)
        if self.channels:
            self.records.append(records)
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

    def _execute(self, files: list[str], opts: list[str], imports: list[str],
                 warm: WarmPytest | None) -> tuple[ExecResult, bool]:
        """One run of the task's test command on ``files``: in the pytest imported ahead of
        time when the command is plain pytest (the second value says so), else in a new
        process."""
        env = self.task.environment
        timeout = self.g.config.timeout or env.timeout
        plain = pytest_argv(env.test_cmd) if self.pytest else None
        if self.channels:
            opts = [*opts, *reporter.pytest_options()]
        # the configuration's own plugins come after the reporter: no code of the repository
        # may run before it has read its key
        opts = [*opts, *self.plugins]
        if warm is not None and plain is not None and warm.wait_ready(10.0):
            form, args = plain
            plugin = ((reporter.PLUGIN, f"{reporter.PLUGIN_DIR}/{reporter.PLUGIN}.py")
                      if self.channels else None)
            return warm.run(self.box, [*args, *opts, *files], form, imports, timeout,
                            self.g.config.log_limit, self.end_user, plugin), True
        command = f"{env.test_cmd} {shlex.join(opts)} {shlex.join(files)}"
        if self.channels:
            command = f"export {reporter.env_assignment()}; {command}"
        # the import check runs after the tests, in the same exec; the exit status stays
        # pytest's
        check = self._import_check() if imports else ""
        command = f"{command}; __rc=$?; {check} exit $__rc"
        return self.box.exec(
            ["env", *(f"{k}={v}" for k, v in TEST_ENV.items()), "bash", "-c", command],
            timeout=timeout, limit=self.g.config.log_limit,
        ), False

    def _kept_python(self) -> list[str]:
        return [p for p in self.changed if p.endswith(".py") and p not in self.report.stripped]

    def _compile_check(self) -> str:
        """Prints COMPILE_FAILED when a Python file the agent changed does not compile."""
        files = self._kept_python()
        if not files:
            return ""
        code = ("import sys\nfor p in sys.argv[1:]:\n try: compile(open(p,'rb').read(),p,'exec')"
                "\n except (SyntaxError, ValueError, OSError): sys.exit(1)")
        return (f"timeout 30 python3 -I -c {shlex.quote(code)} "
                f"{' '.join(shlex.quote(f) for f in files)} >/dev/null 2>&1 || "
                "printf COMPILE_FAILED; ")

    def _modules(self) -> list[str]:
        """The top-level packages and modules the agent changed (``src/pkg/...`` is ``pkg``)."""
        tops = set()
        for path in self._kept_python():
            parts = path.split("/")
            tops.add(parts[1] if len(parts) > 2 and parts[0] in ("src", "lib") else parts[0])
        return sorted(m for m in (t.removesuffix(".py") for t in tops) if m.isidentifier())

    def _import_check(self) -> str:
        """Whether the packages the agent changed still import."""
        modules = self._modules()
        if not modules:
            return ""
        # what importing prints stays out of the log: only the check's line reaches it (fd 3)
        words = f" {self.task.environment.test_cmd} "
        cwd = " -m pytest " in words or " -mpytest " in words
        code = IMPORT_CHECK + f"os.write(3, check(sys.argv[1:], {cwd}).encode())"
        return (f"timeout 10 python -c {shlex.quote(code)} {' '.join(modules)} "
                "3>&1 >/dev/null 2>&1; "
                "printf '\\n__RG_IMPORTS=%d\\n' $?;")

    # --- 4. the verdict ------------------------------------------------------------------------

    def judge(self, log: str, junit_xml: str, canaries: Canaries | None) -> None:
        Verdict(self.report, self.task, self.pytest, self.records, self.disguise).judge(
            log, junit_xml, canaries)


def prepare_grader(box: DockerSandbox) -> None:
    """Starts a new grading container's root runner and pytest's import (see ``warm_pytest``),
    twice (the test run's and the decoy run's), and waits for the imports in the pool's filler
    thread, so that a ready container is warm through and through."""
    box.attachments["root"] = Runner.start(box)
    box.attachments["pytest"] = WarmPytest.start(box, TEST_ENV)
    box.attachments["pytest_decoy"] = WarmPytest.start(box, TEST_ENV)
    for key in ("pytest", "pytest_decoy"):  # a refusal or a slow import: grading falls back
        box.attachments[key].wait_ready(30.0)


def _start_time(pid: int, var: str) -> str:
    """Shell (builtins only) that sets ``var`` to the start time of process ``pid`` (empty when
    there is none): with its id, it names one process, never one that took its id later."""
    return (f"{var}=; __rg_stat=; read -r __rg_stat < /proc/{int(pid)}/stat 2>/dev/null && "
            f"{{ __rg_stat=${{__rg_stat##*) }}; set -- $__rg_stat; {var}=${{20:-}}; }}\n")


def _close_quietly(box: DockerSandbox) -> None:
    """Removes a grading container in the background. Should the engine be gone by then, the
    container stays on the list the process removes at exit: say so instead of a traceback."""
    try:
        box.close()
    except RepogymError as exc:
        warnings.warn(f"grading container {box.name} not removed yet: {exc}", stacklevel=1)


def test_files(task: Task) -> list[str]:
    """The test files a grading run names on the test command's line."""
    env = task.environment
    files = list(env.test_files) or stage.header_paths(task.test_patch)
    if runs_pytest(env):
        for test_id in (*task.FAIL_TO_PASS, *task.PASS_TO_PASS):
            files.append(test_id.split("::")[0])
        files = [f for f in files if f.endswith(".py")] or files
    return sorted(dict.fromkeys(files))


def report_json(report: GradingReport) -> str:
    return json.dumps(report.to_dict(), sort_keys=True)
