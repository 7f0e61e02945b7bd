"""Checking candidate tasks at scale: fewer test runs, in warm containers, shared images.

``derive_lists`` (``repogym.tasks.validate``) builds each candidate's image and runs the whole
suite twice without and twice with the gold patch, each in a fresh container. A ``Checker``
gives the same lists for much less:

- **One image per snapshot.** A replication or synthetic candidate is the snapshot plus a
  change to library files. It is checked in the snapshot's image with its change applied to
  ``/testbed`` (its gold side is the snapshot itself), once the map below shows the tests
  import the library from ``/testbed`` (an installed copy elsewhere would not see the change:
  then the candidate is checked the old way, in its own image).
- **A baseline per image**: the gold side's runs (``runs`` of them, shared by every candidate
  of the image) and a coverage map (``repogym.tasks.coverage``).
- **Only the tests a change reaches**, plus a seeded sample of the others, run on the
  candidate's side (``runs`` times). A sampled test that changes outcome means the map missed
  something: that candidate then runs the whole suite. No test reached, or none failing: the
  candidate is rejected without a full run.
- **One full run confirms** a kept candidate: its lists come from that run and the gold side's
  full runs, exactly as ``derive_lists`` computes them (see the README for how they can differ:
  only through flaky tests).
- **Warm containers**: every run takes a grading container of the image from a pool that
  resets used ones in place, verified (``repogym.envs.grading.recycle``).

Other candidates (mined commits, SWE-bench instances: each its own image) go to
``derive_lists`` with the same pool. A kept candidate also gets the facts its statement is
written from: what its failing tests observe on the broken code (``extra["observed"]``).
"""

from __future__ import annotations

import json
import shlex
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repogym.envs.grading.grader import (
    PYTEST_PARSERS,
    TEST_ENV,
    Grader,
    GraderConfig,
    GradingReport,
    test_files,
)
from repogym.envs.grading.recycle import reset_grader
from repogym.envs.sandbox.pool import SandboxPool
from repogym.errors import RepogymError, TaskError
from repogym.tasks.coverage import Change, CoverageMap, changed_functions, combine
from repogym.tasks.images import ensure_image
from repogym.tasks.schema import Task
from repogym.tasks.sources.common import run_git
from repogym.tasks.sources.pyast import library_files, module_name
from repogym.tasks.validate import (
    NO_F2P,
    derive_lists,
    error_reason,
    flaky_tests,
    measured_lists,
    run_problem,
)

PLUGIN = Path(__file__).with_name("coverage_plugin.py")
G = "/opt/repogym-grade"
OBSERVED_TESTS = 20  # failing tests whose observations a statement is written from
Log = Callable[[str], None]


@dataclass(frozen=True)
class CheckOptions:
    """How candidates are checked (the command line's ``--runs``, ``--check``, ``--workers``)."""

    runs: int = 2  # runs per side; tests whose outcome differs between runs are dropped
    selective: bool = True  # False: every candidate the old way (own image, full runs)
    sample: int = 20  # tests beyond those a change reaches, run to catch what the map missed
    workers: int = 1  # warm grading containers kept per image
    seed: int = 0
    trace_factor: float = 2.0  # the mapping run may take this many times the task's timeout

    def __post_init__(self) -> None:
        if self.runs < 1:
            raise ValueError(f"--runs {self.runs}: tests must run at least once per side.")
        if self.sample < 0 or self.workers < 1:
            raise ValueError(f"sample={self.sample}, workers={self.workers}: give sample >= 0 "
                             "and at least one worker.")


@dataclass
class Baseline:
    """The gold side of one image: its full runs, and the map when it could be made."""

    image: str
    runs: list[GradingReport] = field(default_factory=list)
    problem: str | None = None  # why no candidate of this image can be checked here
    coverage: CoverageMap | None = None
    note: str = ""  # why there is no map, or why candidates go to their own images
    shared: bool = False  # the tests import the library from /testbed
    seconds: float = 0.0


@dataclass
class _Slot:
    lock: threading.Lock = field(default_factory=threading.Lock)
    value: Baseline | None = None


class Checker:
    """Checks candidates (``derive`` is a source's ``Deriver``); safe to call from threads."""

    def __init__(self, options: CheckOptions | None = None, log: Log | None = None) -> None:
        self.options = options or CheckOptions()
        self.log = log or (lambda _m: None)
        # one spare per worker: a used container resets while its replacement runs
        w = self.options.workers
        self.pool = SandboxPool(size=2 * w, grader_size=w, reset={"grader": reset_grader})
        self.grader = Grader(GraderConfig(cleanup_async=False), pool=self.pool)
        self._slots: dict[tuple[str, ...], _Slot] = {}
        self._lock = threading.Lock()
        self.stats: Counter[str] = Counter()
        self.seconds: dict[str, float] = {}

    def close(self) -> None:
        self.pool.close()

    def __enter__(self) -> Checker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def summary(self) -> dict[str, Any]:
        """Counts of runs and candidates by path, and seconds by phase, for report.json."""
        return {"counts": dict(self.stats), "seconds": {k: round(v, 1) for k, v in
                                                        self.seconds.items()},
                "containers": dict(self.pool.stats)}

    # ------------------------------------------------------------------------ the entry

    def derive(self, task: Task) -> tuple[Task | None, str]:
        """The task with its lists measured (and ``extra["observed"]``), or why not."""
        try:
            if self.options.selective and _shareable(task):
                done, reason, where = self._shared(task)
            else:
                done, reason = self._full(task)
                where = None
            if done is None:
                return None, reason
            if where is None:
                image = ensure_image(task, progress=lambda _m: None).tag
                where = (image, [task.test_patch] if task.test_patch.strip() else [])
        except RepogymError as exc:
            return None, error_reason(exc)
        return self._observe(done, *where), reason

    def _full(self, task: Task) -> tuple[Task | None, str]:
        """The old way: every run of the whole suite, in the candidate's own image."""
        self.count("candidates checked with full runs in their own image")
        start = time.monotonic()
        try:
            return derive_lists(task, runs=self.options.runs, grader=self.grader)
        finally:
            self.add_seconds("full runs in own images", time.monotonic() - start)

    def count(self, what: str, n: int = 1) -> None:
        with self._lock:
            self.stats[what] += n

    def add_seconds(self, what: str, seconds: float) -> None:
        with self._lock:
            self.seconds[what] = self.seconds.get(what, 0.0) + seconds

    # ------------------------------------------------------------------------ shared images

    def _shared(self, task: Task) -> tuple[Task | None, str, tuple[str, list[str]] | None]:
        """(task or None, reason, where its broken side runs: image and patches)."""
        head = task.extra["original_commit"]
        image_task = task.with_(base_commit=head, patch="", FAIL_TO_PASS=(), PASS_TO_PASS=())
        base = self.baseline(image_task)
        if base.problem:
            return None, base.problem, None
        if not base.shared:
            self.log(f"{task.instance_id}: checked in its own image ({base.note})")
            return (*self._full(task), None)
        broken = _diff(task, head, task.base_commit)
        done, reason = _Candidate(self, task, base, broken, _change(task, head)).check()
        return done, reason, (base.image, [broken])

    def baseline(self, image_task: Task) -> Baseline:
        """The image's baseline, made once (other threads wait for it)."""
        key = (image_task.repo, image_task.base_commit, json.dumps(
            image_task.environment.__dict__, sort_keys=True, default=list), image_task.source)
        with self._lock:
            slot = self._slots.setdefault(key, _Slot())
        with slot.lock:
            if slot.value is None:
                start = time.monotonic()
                slot.value = self._make_baseline(image_task)
                slot.value.seconds = time.monotonic() - start
                self.add_seconds("baselines", slot.value.seconds)
                self.log(f"baseline of {image_task.repo} at {image_task.base_commit[:12]}: "
                         f"{slot.value.seconds:.0f} s, "
                         f"{len(slot.value.coverage.tests) if slot.value.coverage else 0} tests "
                         f"mapped{'; ' + slot.value.note if slot.value.note else ''}")
            return slot.value

    def _make_baseline(self, image_task: Task) -> Baseline:
        try:
            image = ensure_image(image_task, progress=lambda _m: None).tag
        except RepogymError as exc:
            return Baseline("", problem=error_reason(exc))
        base = Baseline(image)
        pytest = image_task.environment.log_parser in PYTEST_PARSERS
        # the gold side's runs and the mapping run at once when there are workers for them
        jobs: list[Callable[[], Any]] = [lambda: self.grade(image_task, "", image)
                                         for _ in range(self.options.runs)]
        if pytest:
            jobs.append(lambda: self.trace(image_task, image))
        with ThreadPoolExecutor(max_workers=min(self.options.workers, len(jobs))) as pool:
            futures = [pool.submit(job) for job in jobs]
        try:
            base.runs = [f.result() for f in futures[: self.options.runs]]
        except RepogymError as exc:
            base.problem = error_reason(exc)
            return base
        base.problem = run_problem(base.runs, base.runs)
        if base.problem:
            return base
        if not pytest:
            base.note = "the tests do not run under pytest: no map"
            return base
        try:
            base.coverage = futures[-1].result()
        except RepogymError as exc:
            base.note = f"no map: {str(exc).splitlines()[0][:200]}"
            return base
        base.shared, base.note = _imports_from_testbed(image_task, base.coverage)
        return base

    # ------------------------------------------------------------------------ runs

    def grade(self, task: Task, patch: str, image: str, tests: list[str] | None = None
              ) -> GradingReport:
        kind = "selected runs" if tests else "full runs"
        self.count(kind)
        start = time.monotonic()
        try:
            return self.grader.grade(task, patch, image, tests or ())
        finally:
            self.add_seconds(kind, time.monotonic() - start)

    def trace(self, image_task: Task, image: str) -> CoverageMap:
        """The coverage map of the image's whole suite (one traced run)."""
        packages = sorted({module_name(p).split(".")[0] for p in _library(image_task)})
        env = {"REPOGYM_COVERAGE_PACKAGES": ",".join(packages)}
        timeout = image_task.environment.timeout * self.options.trace_factor
        start = time.monotonic()
        try:
            out = self.plugin_run(image_task, image, [], test_files(image_task), env, timeout)
        finally:
            self.add_seconds("traced runs", time.monotonic() - start)
            self.count("traced runs")
        return CoverageMap.from_json(out)

    def plugin_run(self, task: Task, image: str, patches: list[str], args: list[str],
                   env: dict[str, str], timeout: float) -> str:
        """Runs the task's tests under the coverage plugin in a warm container of ``image``
        (``patches`` applied first); returns what the plugin wrote."""
        box = self.pool.acquire(image, role="grader", **self.grader.container_config())
        try:
            files = {"repogym-grade/cov/repogym_coverage.py": PLUGIN.read_bytes()}
            files.update({f"repogym-grade/cov/{i}.patch": p.encode("utf-8", "surrogateescape")
                          for i, p in enumerate(patches)})
            box.put_files(files, "/opt")
            apply = "".join(f"git apply --binary --whitespace=nowarn {G}/cov/{i}.patch "
                            f"|| exit 3\n" for i in range(len(patches)))
            setup = box.exec(["bash", "-c", f"set -e\ncd /testbed\n{apply}mkdir -p {G}/out\n"
                              f"chown 1000:1000 {G}/out"], user="root", timeout=120)
            if setup.exit_code != 0:
                raise TaskError(f"could not prepare a traced run: {setup.output[-300:]}")
            out = f"{G}/out/coverage.json"
            opts = ["-p", "no:cacheprovider", "-o", "addopts=", "--rootdir=/testbed",
                    "-p", "repogym_coverage"]
            command = f"{task.environment.test_cmd} {shlex.join(opts)} {shlex.join(args)}"
            variables = {**TEST_ENV, **env, "PYTHONPATH": f"{G}/cov",
                         "REPOGYM_COVERAGE_OUT": out}
            run = box.exec(["env", *(f"{k}={v}" for k, v in variables.items()), "bash", "-c",
                            command], timeout=timeout, limit=1 << 20)
            if run.timed_out:
                raise TaskError(f"the traced run took more than {timeout:.0f} s")
            result = box.exec(["cat", out], user="root", timeout=120, limit=1 << 30)
            if result.exit_code != 0 or result.truncated:
                raise TaskError(f"the traced run wrote no map (exit {run.exit_code}): "
                                f"{run.output[-300:]}")
            return result.output
        finally:
            self.pool.release(box)

    # ------------------------------------------------------------------------ observations

    def _observe(self, task: Task, image: str, patches: list[str]) -> Task:
        """What the failing tests observe on the broken code (``image`` with ``patches``):
        the functions they call and the failure they report. A statement is written from it,
        never from the tests' code."""
        if task.environment.log_parser not in PYTEST_PARSERS or not task.FAIL_TO_PASS:
            return task
        tests = list(task.FAIL_TO_PASS[:OBSERVED_TESTS])
        start = time.monotonic()
        try:
            out = self.plugin_run(task, image, patches, tests, {"REPOGYM_COVERAGE_ENTRIES": "1"},
                                  task.environment.timeout)
            data = json.loads(out)
        except (RepogymError, ValueError) as exc:
            self.log(f"{task.instance_id}: no observations for its statement: {exc}")
            return task
        finally:
            self.add_seconds("observations", time.monotonic() - start)
        failures = data.get("failures", {})
        observed = {
            "tests": {t: {"failure": failures.get(t, {}),
                          "calls": data.get("entries", {}).get(t, [])} for t in tests},
            "collection": {k.split(":", 1)[1]: v for k, v in failures.items()
                           if k.startswith("<collection>:")}}
        return task.with_(extra={**task.extra, "observed": observed})


class _Candidate:
    """One shared-image candidate's selective check (see the module docstring)."""

    def __init__(self, checker: Checker, task: Task, base: Baseline, broken: str,
                 change: Change) -> None:
        self.c, self.task, self.base, self.broken, self.change = (
            checker, task, base, broken, change)
        self.image_task = task.with_(base_commit=task.extra["original_commit"], patch="",
                                     FAIL_TO_PASS=(), PASS_TO_PASS=())

    def check(self) -> tuple[Task | None, str]:
        base, opts = self.base, self.c.options
        assert base.coverage is not None
        every = len(base.coverage.tests)
        # a tenth of the tests a change does not reach, at most ``sample`` of them
        size = min(opts.sample, max(2, every // 10))
        affected, sample = base.coverage.selection(self.change, size, opts.seed)
        if affected is not None and not affected:
            self.c.count("rejected: no test reaches the change")
            return None, NO_F2P
        if affected is None or 2 * len(affected) >= every:
            self.c.count("candidates run in full (change reaches everywhere)")
            return self.full(f"{len(affected) if affected else 'every'} of {every} tests "
                             f"reached{': ' + self.change.everywhere if affected is None else ''}")
        selected = sorted(affected | set(sample))
        runs = [self.run(selected) for _ in range(opts.runs)]
        problem = run_problem(runs, base.runs) or self.not_applied(runs)
        if problem:
            return None, problem
        if any(t not in r.statuses for r in runs for t in selected):
            return self.full("a selected test was not collected alone")
        after = base.runs[0].statuses
        moved = [t for t in sample if runs[0].statuses.get(t) not in
                 {r.statuses.get(t) for r in base.runs}]
        if moved:
            self.c.count("candidates run in full (the map missed a test)")
            return self.full(f"sampled tests changed outcome: {moved[:3]}")
        flaky = _flaky(base.runs) | _flaky(runs)
        f2p, _ = measured_lists(runs[0].statuses, {t: after.get(t, "") for t in selected}, flaky)
        if not f2p:
            self.c.count("rejected after selected runs")
            return None, NO_F2P
        return self.confirm(runs, affected)

    def run(self, tests: list[str] | None) -> GradingReport:
        return self.c.grade(self.image_task, self.broken, self.base.image, tests)

    def not_applied(self, runs: list[GradingReport]) -> str | None:
        bad = next((r for r in runs if not r.patch_applied or r.stripped), None)
        if bad is None:
            return None
        return (f"the candidate's change does not apply to its snapshot's image: "
                f"{bad.log_tail[-200:]}")

    def confirm(self, selected: list[GradingReport], affected: set[str]
                ) -> tuple[Task | None, str]:
        """One full run; the lists come from it (and the partial runs, for flakiness)."""
        confirm = self.run(None)
        problem = run_problem([confirm], self.base.runs) or self.not_applied([confirm])
        if problem:
            return None, problem
        after = self.base.runs[0].statuses
        flaky = _flaky(self.base.runs) | _flaky_partial(
            [confirm.statuses, *(r.statuses for r in selected)])
        f2p, p2p = measured_lists(confirm.statuses, after, flaky)
        missed = sorted(t for t in after if t not in affected
                        and confirm.statuses.get(t) != after.get(t))
        self.c.count("candidates confirmed by a full run")
        if missed:
            self.c.count("confirm runs that found tests the map missed")
            self.c.log(f"{self.task.instance_id}: the full run moved tests the map did not "
                       f"select: {missed[:3]}")
        if not f2p:
            return None, NO_F2P
        extra = {**self.task.extra, "checked": {
            "image": self.base.image, "reached": len(affected), "missed": missed[:20]}}
        return self.task.with_(FAIL_TO_PASS=tuple(f2p), PASS_TO_PASS=tuple(p2p),
                               extra=extra), "ok"

    def full(self, why: str) -> tuple[Task | None, str]:
        """``runs`` full runs on the candidate's side, as ``derive_lists`` does."""
        self.c.log(f"{self.task.instance_id}: full runs ({why})")
        runs = [self.run(None) for _ in range(self.c.options.runs)]
        problem = run_problem(runs, self.base.runs) or self.not_applied(runs)
        if problem:
            return None, problem
        flaky = _flaky(self.base.runs) | _flaky(runs)
        f2p, p2p = measured_lists(runs[0].statuses, self.base.runs[0].statuses, flaky)
        if not f2p:
            return None, NO_F2P
        extra = {**self.task.extra, "checked": {"image": self.base.image, "full": why}}
        return self.task.with_(FAIL_TO_PASS=tuple(f2p), PASS_TO_PASS=tuple(p2p),
                               extra=extra), "ok"


# ---------------------------------------------------------------------------- helpers


def _shareable(task: Task) -> bool:
    """A candidate that is its snapshot plus a change to library files only."""
    return (task.kind in ("replication", "synthetic") and not task.test_patch.strip()
            and bool(task.extra.get("original_commit")) and bool(task.source))


def _flaky(runs: list[GradingReport]) -> set[str]:
    return flaky_tests([r.statuses for r in runs])


def _flaky_partial(runs: list[dict[str, str]]) -> set[str]:
    """Tests whose outcome differs between the runs that ran them."""
    seen: dict[str, set[str]] = {}
    for run in runs:
        for test, status in run.items():
            seen.setdefault(test, set()).add(status)
    return {t for t, statuses in seen.items() if len(statuses) > 1}


def _diff(task: Task, old: str, new: str) -> str:
    return run_git(Path(task.source or "."), "diff", "--no-color", "--no-ext-diff", "--binary",
                   "--no-renames", old, new)


def _change(task: Task, head: str) -> Change:
    """The functions of the snapshot (``head``) that the candidate's change touches."""
    repo = Path(task.source or ".")
    paths = run_git(repo, "diff", "--name-only", "--no-renames", "-z", head, task.base_commit)
    changes = []
    for path in sorted(p for p in paths.split("\0") if p):
        mapped = run_git(repo, "show", f"{head}:{path}", check=False)
        other = run_git(repo, "show", f"{task.base_commit}:{path}", check=False)
        changes.append(changed_functions(path, mapped, other))
    return combine(changes)


def _library(task: Task) -> list[str]:
    out = run_git(Path(task.source or "."), "ls-tree", "-r", "-z", "--name-only",
                  task.base_commit)
    return library_files(p for p in out.split("\0") if p)


def _imports_from_testbed(task: Task, coverage: CoverageMap) -> tuple[bool, str]:
    """Whether the tests run the repository's own library files (so a change applied to
    ``/testbed`` is what they run), and if not, why."""
    elsewhere = {name: path for name, path in coverage.modules.items()
                 if path and not path.startswith("/testbed/")}
    if elsewhere:
        return False, f"the tests import {sorted(elsewhere.items())[:2]}, not /testbed"
    if not coverage.reached_files() & set(_library(task)):
        return False, "no test runs a library file of /testbed"
    return True, ""
