"""The grader: a fresh container from the pristine image, the agent's diff without its test
changes, the task's test patch, canaries, one harness-owned test run, two cross-checked result
sources, and a verdict that only explicit passes can earn.

See the README's "Grading and safety" for what is defended and what is not.
"""

from __future__ import annotations

import base64
import json
import random
import re
import shlex
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from swebench.harness.grading import get_eval_tests_report, get_resolution_status

from repogym.envs.grading.canary import Canaries, canary_problems, make_canaries
from repogym.envs.grading.differential import run_differential
from repogym.envs.grading.protect import CONTENT_CHECKED, protected_reason, pytest_settings
from repogym.envs.grading.results import disagreements, parse_junit, parse_log
from repogym.envs.sandbox.base import SandboxConfig
from repogym.envs.sandbox.docker import DockerSandbox
from repogym.envs.sandbox.pool import SandboxPool
from repogym.errors import GradingError
from repogym.tasks.schema import Task

G = "/opt/repogym-grade"
PYTEST_PARSERS = {"pytest", "parse_log_pytest", "pytest_v2", "parse_log_pytest_v2",
                  "pytest_options", "parse_log_pytest_options"}
GRADER_CAPS = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL")


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
    flags: list[str] = field(default_factory=list)
    invalid_reasons: list[str] = field(default_factory=list)
    canaries: dict[str, str] = field(default_factory=dict)
    statuses: dict[str, str] = field(default_factory=dict)
    swebench_status: str = ""
    exit_code: int | None = None
    timed_out: bool = False
    test_seconds: float = 0.0
    total_seconds: float = 0.0
    image: str = ""
    log_tail: str = ""
    differential: dict[str, Any] | None = None  # replication tasks: agreement with the reference

    def invalidate(self, reason: str, flag: str | None = None) -> None:
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
    cleanup_async: bool = True


class Grader:
    """Grades patches; with a pool, its containers are started ahead of time."""

    def __init__(self, config: GraderConfig | None = None, seed: int | None = None,
                 pool: SandboxPool | None = None):
        self.config = config or GraderConfig()
        self.rng = random.Random(seed)
        self.pool = pool

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
            _Run(self, task, box, report).grade(patch)
        finally:
            report.total_seconds = time.monotonic() - start
            if self.pool is not None:
                self.pool.release(box)  # graders are never reused: the pool removes it
            elif self.config.cleanup_async:
                threading.Thread(target=box.close, daemon=True).start()
            else:
                box.close()
        return report


class _Run:
    """One grading run in one container."""

    def __init__(self, grader: Grader, task: Task, box: DockerSandbox, report: GradingReport):
        self.g, self.task, self.box, self.report = grader, task, box, report
        self.pytest = task.environment.log_parser in PYTEST_PARSERS
        self.changed: list[str] = []

    def root(self, script: str, timeout: float = 120) -> tuple[int, str]:
        result = self.box.exec(["bash", "-c", script], user="root", timeout=timeout,
                               limit=64 * 1024 * 1024)
        return result.exit_code, result.output

    def grade(self, patch: str) -> None:
        files = {"agent.patch": patch.encode("utf-8", errors="surrogateescape"),
                 "test.patch": self.task.test_patch.encode("utf-8", errors="surrogateescape")}
        self.box.put_files({f"repogym-grade/{k}": v for k, v in files.items()}, "/opt")
        changed, existing = self.apply_agent_patch(bool(patch.strip()))
        self.changed = changed
        test_files = self.test_files()
        canaries = None
        if self.pytest and self.g.config.canaries:
            canaries = make_canaries(test_files, existing | set(test_files), self.g.rng)
        self.prepare(changed, canaries)
        # no known test files: the whole suite runs, and discovery finds the canaries too
        run_files = test_files + ([canaries.path] if canaries else []) if test_files else []
        log, junit = self.run_tests(run_files)
        self.report.differential = run_differential(self.box, self.task)  # after the tests' pkill
        self.judge(log, junit, canaries)

    # --- 1. the agent's diff, minus everything it may not touch ----------------------------

    def apply_agent_patch(self, nonempty: bool) -> tuple[list[str], set[str]]:
        """Applies the agent's diff; returns the paths it touches and the repository's files."""
        apply = (f"git apply --numstat -z {G}/agent.patch | base64 -w0; echo; "
                 f"git apply --binary --whitespace=nowarn {G}/agent.patch >{G}/apply.log 2>&1; "
                 f"echo APPLY=$?; tail -c 2000 {G}/apply.log" if nonempty else "echo; echo APPLY=0")
        _, out = self.root(f"cd /testbed && git ls-files -z | base64 -w0; echo; {apply}")
        files_b64, encoded, rest = (out.split("\n", 2) + ["", ""])[:3]
        existing = set(base64.b64decode(files_b64 or b"").decode(errors="replace").split("\0"))
        self.report.patch_applied = rest.startswith("APPLY=0")
        if not self.report.patch_applied:
            self.report.flags.append("patch_failed")
            self.report.log_tail = rest[-2000:]
            return [], existing
        return _numstat_paths(base64.b64decode(encoded or b"")), existing

    def protected(self, changed: list[str]) -> dict[str, str]:
        test_files = frozenset(_patch_paths(self.task.test_patch)) | set(
            self.task.environment.test_files)
        out = {p: r for p in changed if (r := protected_reason(p, test_files))}
        for path in changed:
            name = path.rsplit("/", 1)[-1]
            if name in CONTENT_CHECKED and path not in out and self._pytest_config_changed(path):
                out[path] = "pytest_config"
        return out

    def _pytest_config_changed(self, path: str) -> bool:
        q = shlex.quote(path)
        _, before = self.root(f"cd /testbed && git show HEAD:{q} 2>/dev/null | base64 -w0")
        _, after = self.root(f"cd /testbed && base64 -w0 {q} 2>/dev/null")
        name = path.rsplit("/", 1)[-1]
        texts = [base64.b64decode(t.strip() or b"").decode(errors="replace")
                 for t in (before, after)]
        return pytest_settings(name, texts[0]) != pytest_settings(name, texts[1])

    # --- 2. test patch, canaries, permissions ------------------------------------------------

    def prepare(self, changed: list[str], canaries: Canaries | None) -> None:
        stripped = self.protected(changed)
        self.report.stripped = stripped
        for reason in sorted(set(stripped.values())):
            self.report.flags.append(f"tampered_{reason}")
        restore = "".join(
            f"if git cat-file -e HEAD:{shlex.quote(p)} 2>/dev/null; then "
            f"git checkout -q HEAD -- {shlex.quote(p)}; else rm -rf -- {shlex.quote(p)}; fi\n"
            for p in stripped
        )
        py_changed = [p for p in changed if p.endswith(".py") and p not in stripped]
        canary_write = ""
        if canaries:
            body = base64.b64encode(canaries.source.encode()).decode()
            canary_write = (f"mkdir -p $(dirname {shlex.quote(canaries.path)}) && echo {body} "
                            f"| base64 -d > {shlex.quote(canaries.path)}\n")
        script = f"""set -u
cd /testbed
{restore}
if [ -s {G}/test.patch ]; then git apply --binary --whitespace=nowarn {G}/test.patch \
  || {{ echo TEST_PATCH_FAILED; exit 3; }}; fi
{canary_write}
python3 - {" ".join(shlex.quote(p) for p in py_changed)} <<'PY' || echo COMPILE_FAILED
import sys
for path in sys.argv[1:]:
    try:
        compile(open(path, "rb").read(), path, "exec")
    except (SyntaxError, ValueError, OSError) as exc:
        print("COMPILE_ERROR", path, exc); sys.exit(1)
PY
mkdir -p {G}/out && chown 1000:1000 {G}/out 2>/dev/null || chmod 777 {G}/out
{self._lock_script(canaries)}
"""
        code, out = self.root(script)
        if "TEST_PATCH_FAILED" in out:
            raise GradingError(
                f"{self.task.instance_id}: the task's test_patch does not apply to its image; "
                f"run `repogym tasks validate` on the suite. {out[-800:]}"
            )
        self.report.compiles = "COMPILE_FAILED" not in out

    def _protected_dirs(self, canaries: Canaries | None) -> list[str]:
        """/testbed and every folder on the way to a test file: no new conftest.py there."""
        dirs = {"."}
        for path in self.test_files() + ([canaries.path] if canaries else []):
            parts = path.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                dirs.add("/".join(parts[:i]))
        return sorted(dirs)

    def _lock_script(self, canaries: Canaries | None) -> str:
        """Test files and the folders above them become root's, so code under test cannot
        rewrite a test or plant a conftest.py while the run is going on."""
        paths = self.test_files() + ([canaries.path] if canaries else [])
        quoted = " ".join(shlex.quote(p) for p in paths if p)
        qdirs = " ".join(shlex.quote(d) for d in self._protected_dirs(canaries))
        return (f"for f in {quoted}; do [ -e \"$f\" ] && chown root:root \"$f\" "
                f"&& chmod 644 \"$f\"; done; for d in {qdirs}; do [ -d \"$d\" ] && "
                f"chown root:root \"$d\" && chmod 755 \"$d\"; done; true")

    def test_files(self) -> list[str]:
        env = self.task.environment
        files = list(env.test_files) or _patch_paths(self.task.test_patch)
        if self.pytest:
            for test_id in (*self.task.FAIL_TO_PASS, *self.task.PASS_TO_PASS):
                files.append(test_id.split("::")[0])
            files = [f for f in files if f.endswith(".py")] or files
        return sorted(dict.fromkeys(files))

    # --- 3. the run ----------------------------------------------------------------------------

    def run_tests(self, files: list[str]) -> tuple[str, str]:
        env = self.task.environment
        timeout = self.g.config.timeout or env.timeout
        opts = ""
        if self.pytest:
            opts = (f" -p no:cacheprovider -o addopts= -o junit_family=xunit1 "
                    f"--junitxml={G}/out/junit.xml --rootdir=/testbed")
        command = f"{env.test_cmd}{opts} {' '.join(shlex.quote(f) for f in files)}"
        # the import check runs after the tests, in the same exec; the exit status stays pytest's
        command = f"{command}; __rc=$?; {self._import_check()} exit $__rc"
        start = time.monotonic()
        result = self.box.exec(
            ["env", "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1", "PYTHONDONTWRITEBYTECODE=1",
             "bash", "-c", command],
            timeout=timeout, limit=self.g.config.log_limit,
        )
        self.report.test_seconds = time.monotonic() - start
        self.report.exit_code = result.exit_code
        self.report.timed_out = result.timed_out
        log, _, imports = result.output.rpartition("\n__RG_IMPORTS=")
        if not _:
            log, imports = result.output, ""
        self.report.log_tail = log[-4000:]
        if imports[:1].isdigit() and not result.timed_out:
            self.report.imports = imports[:1] == "0"
        # nothing the tests left behind may write to the results after this point
        _, junit = self.root(f"pkill -9 -u 1000 2>/dev/null; cat {G}/out/junit.xml 2>/dev/null",
                             timeout=30)
        return log, junit

    def _import_check(self) -> str:
        """Whether the packages the agent changed still import."""
        kept = [p for p in self.changed if p.endswith(".py") and p not in self.report.stripped]
        modules = sorted({p.split("/")[0].removesuffix(".py") for p in kept})
        modules = [m for m in modules if m.isidentifier()]
        if not modules:
            return ""
        code = "import importlib,sys\nfor m in sys.argv[1:]: importlib.import_module(m)"
        return (f"timeout 10 python -c {shlex.quote(code)} {' '.join(modules)} >/dev/null 2>&1; "
                "printf '\\n__RG_IMPORTS=%d\\n' $?;")

    # --- 4. the verdict ------------------------------------------------------------------------

    def judge(self, log: str, junit_xml: str, canaries: Canaries | None) -> None:
        r, task = self.report, self.task
        log_status = parse_log(log, task.environment.log_parser)
        statuses = dict(log_status)
        if self.pytest:
            junit = parse_junit(junit_xml)
            expected = [*task.FAIL_TO_PASS, *task.PASS_TO_PASS] + (
                list(canaries.ids) if canaries else [])
            mismatch = disagreements(junit, log_status, expected)
            if mismatch:
                r.invalidate(f"JUnit and log disagree on {mismatch[:5]}", "report_mismatch")
            statuses = {**log_status, **junit} if not mismatch else {}
        if canaries:
            r.canaries = {node: statuses.get(node, "MISSING") for node in canaries.ids}
            problems = canary_problems(canaries, statuses)
            if problems:
                r.invalidate("; ".join(problems), "canary")
        if r.timed_out:
            r.invalidate("the test run hit its time limit", "timeout")
        self._check_exit(statuses, canaries)
        canary_ids = set(canaries.ids) if canaries else set()
        r.statuses = {t: s for t, s in statuses.items() if t not in canary_ids}
        r.fail_to_pass = {t: statuses.get(t, "MISSING") for t in task.FAIL_TO_PASS}
        r.pass_to_pass = {t: statuses.get(t, "MISSING") for t in task.PASS_TO_PASS}
        missing = [t for t, s in {**r.fail_to_pass, **r.pass_to_pass}.items() if s == "MISSING"]
        if missing:
            # the whole expected set must be collected; an uncollected test is no tampering
            # proof (a broken import does it too), so the run is invalid without a flag
            r.invalidate(f"{len(missing)} expected tests were not collected: {missing[:3]}")
        gold = {"FAIL_TO_PASS": list(task.FAIL_TO_PASS), "PASS_TO_PASS": list(task.PASS_TO_PASS)}
        tests_report = get_eval_tests_report(statuses, gold)
        r.swebench_status = get_resolution_status(tests_report)
        f2p_ok = [t for t, s in r.fail_to_pass.items() if s == "PASSED"]  # explicit passes only
        p2p_ok = tests_report["PASS_TO_PASS"]["success"]
        r.f2p_pass_rate = len(f2p_ok) / len(task.FAIL_TO_PASS) if task.FAIL_TO_PASS else 1.0
        r.p2p_pass_rate = len(p2p_ok) / len(task.PASS_TO_PASS) if task.PASS_TO_PASS else 1.0
        if not r.valid:
            r.f2p_pass_rate = r.p2p_pass_rate = 0.0
        r.resolved = (r.valid and r.patch_applied and not missing
                      and r.swebench_status == "RESOLVED_FULL"
                      and len(f2p_ok) == len(task.FAIL_TO_PASS) and bool(task.FAIL_TO_PASS))

    def _check_exit(self, statuses: dict[str, str], canaries: Canaries | None) -> None:
        r = self.report
        if not self.pytest or r.timed_out or r.exit_code is None:
            return
        failing = [t for t, s in statuses.items() if s in ("FAILED", "ERROR")]
        if r.exit_code == 0 and (failing or canaries):
            r.invalidate(f"pytest exited 0 although {len(failing)} tests failed", "exit_status")
        elif r.exit_code == 1 and not failing:
            r.invalidate("pytest exited 1 but no test failed", "exit_status")
        elif r.exit_code not in (0, 1):
            r.invalidate(f"pytest exited {r.exit_code} (interrupted, internal or usage error)",
                         "exit_status" if canaries and not statuses else None)


def _numstat_paths(raw: bytes) -> list[str]:
    """Paths from ``git apply --numstat -z`` (a rename lists both of its paths)."""
    out: list[str] = []
    fields = raw.split(b"\0")
    i = 0
    while i < len(fields):
        entry = fields[i]
        if not entry:
            i += 1
            continue
        parts = entry.split(b"\t", 2)
        if len(parts) == 3 and parts[2]:
            out.append(parts[2].decode("utf-8", errors="surrogateescape"))
            i += 1
        else:  # "added\tdeleted\t" then old and new paths as separate fields
            out += [f.decode("utf-8", errors="surrogateescape") for f in fields[i + 1 : i + 3]]
            i += 3
    return sorted(dict.fromkeys(out))


_DIFF_PATH = re.compile(r"^(?:\+\+\+ b/|--- a/|rename (?:from|to) |copy (?:from|to) )(.+?)\t?$",
                        re.M)


def _patch_paths(patch: str) -> list[str]:
    """The paths a git diff touches (for patches we trust: the task's own)."""
    paths = [m.group(1).strip('"') for m in _DIFF_PATH.finditer(patch)]
    for line in patch.splitlines():
        if line.startswith("diff --git a/") and " b/" in line:
            paths.append(line[len("diff --git a/") :].split(" b/", 1)[1])
    return sorted({p for p in paths if p != "/dev/null"})


def report_json(report: GradingReport) -> str:
    return json.dumps(report.to_dict(), sort_keys=True)
