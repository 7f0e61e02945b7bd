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
  full runs, exactly as ``derive_lists`` computes them (see docs/adding.md for how they can differ:
  only through flaky tests).
- **Warm containers**: every run takes a grading container of the image from a pool that
  resets used ones in place, verified (``repogym.envs.grading.recycle``).

Other candidates (mined commits, SWE-bench instances: each its own image) go to
``derive_lists`` with the same pool. A kept candidate also gets the facts its statement is
written from: what its failing tests observe on the broken code (``extra["observed"]``).
"""

from __future__ import annotations

import contextlib
import json
import shlex
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repogym.envs.grading import plugins
from repogym.envs.grading.grader import (
    TEST_ENV,
    Grader,
    GraderConfig,
    GradingReport,
    test_files,
)
from repogym.envs.grading.recycle import reset_grader
from repogym.envs.grading.testcmd import runs_pytest
from repogym.errors import RepogymError, TaskError
from repogym.images.repository import ensure_image
from repogym.progress import Progress
from repogym.sandbox.base import SandboxLost
from repogym.sandbox.docker import DockerSandbox
from repogym.sandbox.pool import SandboxPool
from repogym.schema import Environment, Task
from repogym.tasks.batches import Batches, Gate
from repogym.tasks.coverage import CoverageMap
from repogym.tasks.selective import (
    Candidate,
    change,
    diff,
    image_task,
    imports_from_testbed,
    library,
    shareable,
)
from repogym.tasks.sources import leak
from repogym.tasks.sources.common import run_git
from repogym.tasks.sources.enrich import record_gold_cases
from repogym.tasks.sources.leak import image_files, leak_guard
from repogym.tasks.sources.pyast import module_name
from repogym.tasks.sources.trace import record_cases
from repogym.tasks.validate import (
    SNAPSHOT,
    collection_errors_said,
    derive_lists,
    error_reason,
    left_out,
    run_problem,
    uncollected,
)

PLUGIN = Path(__file__).with_name("coverage_plugin.py")
G = "/opt/repogym-grade"
OBSERVED_TESTS = 20  # failing tests whose observations a statement is written from


@dataclass(frozen=True)
class CheckOptions:
    """How candidates are checked (the command line's ``--runs``, ``--check``, ``--workers``)."""

    runs: int = 2  # runs per side; tests whose outcome differs between runs are dropped
    selective: bool = True  # False: every candidate the old way (own image, full runs)
    sample: int = 20  # tests beyond those a change reaches, run to catch what the map missed
    workers: int = 1  # warm grading containers kept per image
    seed: int = 0
    trace_factor: float = 2.0  # the mapping run may take this many times the task's timeout
    confirm_batch: int = 8  # kept candidates one confirming full run may serve (batches.py)

    def __post_init__(self) -> None:
        if self.runs < 1:
            raise ValueError(f"--runs {self.runs}: tests must run at least once per side.")
        if self.confirm_batch < 1:
            raise ValueError(f"--confirm-batch {self.confirm_batch}: give at least 1 (1: a "
                             "full run of its own for every kept candidate).")
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
    # the environment every candidate of the image runs in, when it is not their own: the
    # test files that fail to collect at the snapshot itself left out (``left_out``)
    environment: Environment | None = None


def _key(image_task: Task) -> tuple[str | None, ...]:
    return (image_task.repo, image_task.base_commit, json.dumps(
        image_task.environment.__dict__, sort_keys=True, default=list), image_task.source)


@dataclass
class _Slot:
    lock: threading.Lock = field(default_factory=threading.Lock)
    value: Baseline | None = None
    files: dict[str, bytes] | None = None  # the image's Python files (the leak check's)


class Checker:
    """Checks candidates (``derive`` is a source's ``Deriver``); safe to call from threads."""

    def __init__(self, options: CheckOptions | None = None, log: Progress | None = None) -> None:
        self.options = options or CheckOptions()
        self.log = log or (lambda _m: None)
        # one spare per worker: a used container resets while its replacement runs
        w = self.options.workers
        self.pool = SandboxPool(size=2 * w, grader_size=w, reset={"grader": reset_grader})
        self.grader = Grader(GraderConfig(cleanup_async=False), pool=self.pool)
        # candidates waiting for a shared confirming run step out of the gate, so that more
        # than ``workers`` are in flight: ``in_flight`` tells the loop how many
        batching = self.options.selective and self.options.confirm_batch > 1
        self.gate = Gate(w) if batching else None
        self.batches = Batches(self.options.confirm_batch, self.gate)
        self.in_flight = w * self.options.confirm_batch if batching else w
        self._slots: dict[tuple[str | None, ...], _Slot] = {}
        self._files: dict[str, _Slot] = {}
        self._guard = leak_guard()  # candidates checked in their own images
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
            if self.options.selective and shareable(task):
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
        """The old way: the leak check, then every run of the whole suite, in the candidate's
        own image."""
        leak = self.leak(task, None)
        if leak is not None:
            return None, leak
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
        base = self.baseline(image_task(task))
        if base.problem:
            return None, base.problem, None
        if base.environment is not None:
            task = task.with_(environment=base.environment)
        if not base.shared:
            self.log(f"{task.instance_id}: checked in its own image ({base.note})")
            return (*self._full(task), None)
        start = time.monotonic()
        leak = self.leak(task, base.image)
        self.add_seconds("leak checks", time.monotonic() - start)
        if leak is not None:
            return None, leak, None
        broken = diff(task, head, task.base_commit)
        done, reason = Candidate(self, task, base, broken, change(task, head)).check()
        return done, reason, (base.image, [broken])

    def baseline(self, image_task: Task) -> Baseline:
        """The image's baseline, made once (other threads wait for it)."""
        with self._lock:
            slot = self._slots.setdefault(_key(image_task), _Slot())
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
                if slot.value.environment is not None:  # its candidates' tasks find it too
                    moved = image_task.with_(environment=slot.value.environment)
                    with self._lock:
                        self._slots.setdefault(_key(moved), slot)
            return slot.value

    def _make_baseline(self, image_task: Task) -> Baseline:
        try:
            image = ensure_image(image_task, progress=lambda _m: None).tag
        except RepogymError as exc:
            return Baseline("", problem=error_reason(exc))
        base = self._measure(image_task, image)
        broken = uncollected(base.runs) if runs_pytest(image_task.environment) else []
        if not broken:
            return base
        # test files that do not collect at the snapshot, before any change (an sdist without
        # the helpers they import): no run with them can resolve; the rest of the suite can
        env = left_out(image_task.environment, broken)
        why = collection_errors_said(base.runs[0], broken)
        base = self._measure(image_task.with_(environment=env), image)
        base.environment = env
        base.note = "; ".join(filter(None, [why, base.note]))
        return base

    def _measure(self, image_task: Task, image: str) -> Baseline:
        """The gold side's runs and the coverage map of ``image_task`` in ``image``."""
        base = Baseline(image)
        pytest = runs_pytest(image_task.environment)
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
        base.problem = run_problem(base.runs, base.runs, gold=SNAPSHOT)
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
        base.shared, base.note = imports_from_testbed(image_task, base.coverage)
        return base

    # ------------------------------------------------------------------------ runs

    def grade(self, task: Task, patch: str, image: str, tests: list[str] | None = None
              ) -> GradingReport:
        kind = "selected runs" if tests else "full runs"
        self.count(kind)
        start = time.monotonic()
        try:
            try:
                return self.grader.grade(task, patch, image, tests or ())
            except SandboxLost as exc:  # a container's runner lost: once more, in another one
                self.count("runs again after a lost container")
                self.log(f"{task.instance_id}: a test run lost its container ({exc}); again")
                return self.grader.grade(task, patch, image, tests or ())
        finally:
            self.add_seconds(kind, time.monotonic() - start)

    def trace(self, image_task: Task, image: str) -> CoverageMap:
        """The coverage map of the image's whole suite (one traced run)."""
        packages = sorted({module_name(p).split(".")[0] for p in library(image_task)})
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
        with self.container(image, patches) as box:
            box.put_files({"repogym-grade/cov/repogym_coverage.py": PLUGIN.read_bytes()}, "/opt")
            prepare = box.exec(["bash", "-c", f"mkdir -p {G}/out && chown 1000:1000 {G}/out"],
                               user="root", timeout=60)
            if prepare.exit_code != 0:
                raise TaskError(f"could not prepare a traced run: {prepare.output[-300:]}")
            out = f"{G}/out/coverage.json"
            opts = ["-p", "no:cacheprovider", "-o", "addopts=", "--rootdir=/testbed",
                    "-p", "repogym_coverage", *plugins.plugin_args(plugins.installed(box, image))]
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
            return str(result.output)

    @contextlib.contextmanager
    def container(self, image: str, patches: list[str]) -> Iterator[DockerSandbox]:
        """A warm container of ``image`` with ``patches`` applied to /testbed (the files they
        touch stay the tests' user's, as in an image), reset once the block ends."""
        box = self.pool.acquire(image, role="grader", **self.grader.container_config())
        try:
            if patches:
                box.put_files({f"repogym-grade/in/{i}.patch": p.encode("utf-8", "surrogateescape")
                               for i, p in enumerate(patches)}, "/opt")
                apply = "".join(
                    f"git apply --binary --whitespace=nowarn {G}/in/{i}.patch || exit 3\n"
                    f"git apply --numstat -z {G}/in/{i}.patch | tr '\\0' '\\n' | cut -f3 "
                    f"| grep -v '^$' | xargs -r -d '\\n' chown 1000:1000 --\n"
                    for i in range(len(patches)))
                done = box.exec(["bash", "-c", f"set -e -o pipefail\ncd /testbed\n{apply}"],
                                user="root", timeout=120)
                if done.exit_code != 0:
                    raise TaskError(f"the candidate's change does not apply to its snapshot's "
                                    f"image: {done.output[-300:]}")
            yield box
        finally:
            self.pool.release(box)

    # ------------------------------------------------------------------------ around the check

    def leak(self, task: Task, image: str | None) -> str | None:
        """Why the candidate's image already holds its gold code (``repogym.tasks.sources
        .leak``), or None. ``image``: the snapshot's image, whose files are listed once; the
        candidate's own image differs from it only in the files its change touches."""
        if image is None:
            return self._guard(task)
        config = leak.LeakConfig()
        paths = leak.patched_files(task.patch)
        if not paths:
            return None
        files = dict(self._image_files(image, config))
        before = {p: run_git(Path(task.source or "."), "show", f"{task.base_commit}:{p}")
                  for p in paths}
        files.update({f"{leak.WORKDIR}/{p}": text.encode() for p, text in before.items()})
        copies = leak.find_copies(leak.gold_functions(task.patch, before, config), files, config,
                                  leak.owned_files(task))
        return leak.leak_reason(copies) if copies else None

    def _image_files(self, image: str, config: Any) -> dict[str, bytes]:
        with self._lock:
            slot = self._files.setdefault(image, _Slot())
        with slot.lock:
            if slot.files is None:
                with self.container(image, []) as box:
                    slot.files = image_files(box, config)
            return slot.files

    def case_recorder(self) -> Callable[[Task], tuple[Task | None, str]]:
        """Differential cases of a replication task (``trace.record_cases``), recorded in the
        snapshot's image when the task was checked there."""
        def record(task: Task) -> tuple[Task | None, str]:
            try:
                with self.base_container(task) as box:
                    return record_cases(task, box=box)
            except RepogymError as exc:
                return task, f"no cases recorded: {str(exc).splitlines()[0][:200]}"

        return record

    def gold_recorder(self) -> Callable[[Task], tuple[Task, str]]:
        """Gold cases (``enrich.record_gold_cases``), recorded in the snapshot's image when
        the task was checked there."""
        def record(task: Task) -> tuple[Task, str]:
            try:
                with self.base_container(task) as box:
                    return record_gold_cases(task, box=box)
            except RepogymError as exc:
                return task, f"no gold cases: {str(exc).splitlines()[0][:200]}"

        return record

    @contextlib.contextmanager
    def base_container(self, task: Task) -> Iterator[DockerSandbox | None]:
        """A warm container of the snapshot's image holding the candidate's base code, or None
        when the candidate was checked in its own image."""
        base = self.baseline(image_task(task)) if self.options.selective and \
            shareable(task) else None
        if base is None or base.problem or not base.shared:
            yield None
            return
        head = task.extra["original_commit"]
        with self.container(base.image, [diff(task, head, task.base_commit)]) as box:
            yield box

    # ------------------------------------------------------------------------ observations

    def _observe(self, task: Task, image: str, patches: list[str]) -> Task:
        """What the failing tests observe on the broken code (``image`` with ``patches``):
        the functions they call and the failure they report. A statement is written from it,
        never from the tests' code."""
        if not runs_pytest(task.environment) or not task.FAIL_TO_PASS:
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
