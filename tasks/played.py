"""The gold patch played as an agent's change, and graded the way an agent's diff is graded.

Grading the task's ``patch`` itself proves that the fix passes the hidden tests; it does not
prove that an agent who makes the same change is rewarded for it. An agent's reward comes from
the diff taken out of its container (``git add -A`` against the image's base commit), so
anything between the two breaks that promise: files the image's install wrote into the
repository (a diff that then does not apply in the grading container), a gold file under a
path the repository's ``.gitignore`` leaves out (a diff without it). ``played`` applies the
patch in a container started the way an agent's is and takes the diff the environment would
take; validation grades that.

**The gold of a layout's next tasks, on its failing tests.** That grade is one whole run of the
suite with every defence on, in a fresh grading container: on a suite of hundreds of tests, the
largest cost of ``tasks add``. What it can find on a task beyond what the checks proved (the
gold passes every listed test, undisguised) is one of two things: the diff an agent submits is
not the patch (its paths are compared, above), or the defences change a test's outcome (a test
that reads its own module's name fails under the disguise; sphinx-8627). The second is a
property of the hidden test files and the environment, not of the change. So ``play_gold``
grades whole the first task of each *test layout* (the repository snapshot the tasks were
made from, the environment, the hidden test files); once a layout's gold resolved so, every
other task of it is graded with every defence on the FAIL_TO_PASS tests alone (the test run
keeping their ids: ``Grader.grade(..., by_id=True)``), which proves that the played diff fixes
them under the disguise, the decoy run and the canaries. A task whose narrowed grade does not
resolve is graded whole before it is rejected: only a whole grade rejects. A task whose diff
differs from its patch, whose tests do not run under pytest or whose ids pytest cannot select
is graded whole.

**A listed test that fails in the gold's whole grade and passes alone.** The checks ran the
suite with the gold several times and every PASS_TO_PASS test passed there; the whole grade is
one more run, on a machine that may be busier. A test that asserts on wall time (mistune's
"near linear" tests) fails there and the task was thrown away for it. So when the whole grade's
only failures are a few PASS_TO_PASS tests (``FLIPPED_AT_MOST``, the FAIL_TO_PASS tests passing,
no flag, the run valid), those tests are graded again alone with every defence on: a test that
passes then is flaky (under load, or by the order of the run), and leaves the lists as a flaky
test of the checks does (``dropped_tests`` says why, ``flaky_tests`` counts it); one that fails
again rejects the task as before; the layout's tasks graded on their failing tests alone lose
the same tests. Nothing an agent does reaches this: it runs once, on the gold.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from repogym.envs.grading.grader import Grader, GraderConfig, GradingReport
from repogym.envs.grading.stage import patch_paths
from repogym.envs.grading.testcmd import plain_ids, runs_pytest
from repogym.errors import RepogymError
from repogym.images.recipe import BuiltImage
from repogym.images.repository import ensure_image
from repogym.sandbox.base import SandboxConfig
from repogym.sandbox.docker import DockerSandbox
from repogym.schema import Task

PATCH_FILE = "/tmp/.repogym-played.patch"
FLIPPED_AT_MOST = 5  # PASS_TO_PASS tests a whole grade may fail and still be asked alone


@dataclass(frozen=True)
class Played:
    """An agent's diff after applying a patch, or why there is none."""

    diff: str
    problem: str = ""  # the patch did not apply in the agent's container
    extra: tuple[str, ...] = ()  # paths in the diff the patch does not touch
    missing: tuple[str, ...] = ()  # paths the patch touches that the diff lacks

    def explain(self) -> str:
        """What differs between the patch and the diff an agent who wrote it would submit."""
        parts = [self.problem] if self.problem else []
        if self.extra:
            parts.append(f"the agent's diff also holds {list(self.extra[:5])}, which the image "
                         "already has (written into the repository when it was built?)")
        if self.missing:
            parts.append(f"the agent's diff lacks {list(self.missing[:5])} (paths git ignores "
                         "there: .gitignore, or caches the diff leaves out)")
        return "; ".join(parts)


def played(image: BuiltImage, patch: str) -> Played:
    """The diff an agent would submit after applying ``patch`` in a fresh container of
    ``image`` (as the agent's user, in its persistent shell)."""
    if not patch.strip():
        return Played("")
    with DockerSandbox(SandboxConfig(image=image.tag, role="played")) as box:
        box.write_file(PATCH_FILE, patch.encode("utf-8", errors="surrogateescape"))
        applied = box.run(f"git apply --binary --whitespace=nowarn {PATCH_FILE} && "
                          f"rm -f {PATCH_FILE}", timeout=120)
        if not applied.ok:
            return Played("", f"the patch does not apply in an agent's container: "
                          f"{applied.output.strip()[-300:]}")
        diff = box.diff(image.repo_commit)
    want, got = set(patch_paths(patch)), set(patch_paths(diff))
    return Played(diff, extra=tuple(sorted(got - want)), missing=tuple(sorted(want - got)))


@dataclass(frozen=True)
class GoldCheck:
    """What came of the gold played as an agent's diff on one task."""

    why: str | None  # why an agent who writes the gold would not be rewarded; None: it would
    whole: bool = True  # graded on every hidden test (else on the FAIL_TO_PASS tests alone)
    task: Task | None = None  # the task to keep, when tests that flipped left its lists


def gold_as_agent(task: Task, grader: Grader | None = None) -> str | None:
    """Why an agent who writes the gold change would not be rewarded for it (one graded run of
    the played diff, in the task's own image), or None when it would be."""
    return check_gold(task, grader).why


def check_gold(task: Task, grader: Grader | None = None, narrow: bool = False) -> GoldCheck:
    """``gold_as_agent``; with ``narrow`` (the task's layout's gold resolved whole), graded on
    the FAIL_TO_PASS tests alone where that can settle it (the module docstring)."""
    grader = grader or Grader(GraderConfig(cleanup_async=False))
    try:
        image = ensure_image(task, progress=lambda _m: None)
        diff = played(image, task.patch)
        if diff.problem:
            return GoldCheck(f"gold played as an agent's diff: {diff.problem}")
        if (narrow and not diff.extra and not diff.missing and task.PASS_TO_PASS
                and runs_pytest(task.environment) and plain_ids(task.FAIL_TO_PASS)):
            failing = task.with_(PASS_TO_PASS=())
            if grader.grade(failing, diff.diff, image.tag, by_id=True).resolved:
                return GoldCheck(None, whole=False)
        report = grader.grade(task, diff.diff, image.tag)
    except RepogymError as exc:
        return GoldCheck(f"gold played as an agent's diff: {str(exc).splitlines()[0][:300]}")
    if report.resolved:
        return GoldCheck(None)
    failing_tests = [t for t, s in {**report.fail_to_pass, **report.pass_to_pass}.items()
                     if s not in ("PASSED", "XFAIL", "SKIPPED")]
    why = diff.explain()
    if not why and _flipped_alone(task, diff.diff, image.tag, grader, report, failing_tests):
        return GoldCheck(None, task=_without_flipped(task, failing_tests))
    return GoldCheck(f"gold played as an agent's diff does not resolve it (failing: "
                     f"{failing_tests[:3]}, flags: {report.flag_names()}, invalid: "
                     f"{report.invalid_reasons[:2]})" + (f": {why}" if why else ""))


def _flipped_alone(task: Task, diff: str, image: str, grader: Grader, report: GradingReport,
                   failing: list[str]) -> bool:
    """Whether the whole grade failed only on a few PASS_TO_PASS tests that pass when graded
    again alone (the module docstring)."""
    p2p = set(task.PASS_TO_PASS)
    if (not failing or len(failing) > FLIPPED_AT_MOST or not set(failing) <= p2p
            or report.flag_names() or report.invalid_reasons
            or not runs_pytest(task.environment) or not plain_ids(tuple(failing))):
        return False
    alone = task.with_(FAIL_TO_PASS=tuple(failing), PASS_TO_PASS=())
    try:
        return grader.grade(alone, diff, image, by_id=True).resolved
    except RepogymError:
        return False


def _without_flipped(task: Task, flipped: list[str], seen_on: str = "") -> Task:
    """``task`` less the tests that failed in its gold's whole grade (or, ``seen_on``, in that
    of another task of its layout) and passed alone."""
    of = f" of {seen_on}" if seen_on else ""
    why = f"flaky: failed in the gold's whole grade{of}, passed graded alone"
    counts = copy.deepcopy(task.extra.get("flaky_tests") or {})
    for test in flipped:
        seen = counts.setdefault(test, {}).setdefault("gold graded", {})
        for status in ("FAILED", "PASSED"):
            seen[status] = seen.get(status, 0) + 1
    data = task.to_dict()
    return Task.from_dict({**data, "PASS_TO_PASS": [t for t in task.PASS_TO_PASS
                                                    if t not in flipped],
                           "dropped_tests": {**(task.extra.get("dropped_tests") or {}),
                                             **{t: why for t in flipped}},
                           "flaky_tests": counts})


def gold_layout(task: Task) -> str:
    """What the defences meet in ``task``'s grade besides its change: the repository snapshot
    it was made from, the environment, the hidden test files."""
    files = sorted({i.split("::")[0] for i in (*task.FAIL_TO_PASS, *task.PASS_TO_PASS)})
    return json.dumps([task.repo, str(task.extra.get("original_commit") or task.base_commit),
                       task.to_dict()["environment"], task.test_patch, files], sort_keys=True)


def play_gold(tasks: list[Task], workers: int = 1, grader: Grader | None = None,
              narrow: bool = True, log: Callable[[str], None] = lambda _m: None
              ) -> dict[str, GoldCheck]:
    """``check_gold`` for each task, ``workers`` at once: each test layout's first task graded
    whole, and once one resolved so, the layout's others (with ``narrow``) on their failing
    tests (the module docstring). A layout whose first gold fails has its next task graded
    whole, and so on."""
    layouts: dict[str, list[Task]] = {}
    for task in tasks:
        layouts.setdefault(gold_layout(task), []).append(task)
    # graded whole, nothing waits on a layout's first task
    proven: set[str] = set() if narrow else set(layouts)
    # the tests that flipped in a layout's whole grade, and the task they flipped on: they
    # leave the lists of the layout's narrowed tasks too (the same files, the same tests)
    flipped: dict[str, tuple[str, list[str]]] = {}
    checks: dict[str, GoldCheck] = {}
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        while layouts:
            # a round: every proven layout's tasks narrowed, every other layout's next task whole
            batch = [(key, t, key in proven) for key, queue in layouts.items()
                     for t in (queue if key in proven else queue[:1])]
            for key, task, _ in batch:
                layouts[key].remove(task)
            layouts = {k: q for k, q in layouts.items() if q}
            results = pool.map(lambda b: check_gold(b[1], grader, narrow and b[2]), batch)
            for (key, task, _), check in zip(batch, results, strict=True):
                if check.why is None and check.whole:
                    proven.add(key)
                    if check.task is not None:
                        flipped[key] = (task.instance_id, [
                            t for t in task.PASS_TO_PASS if t not in check.task.PASS_TO_PASS])
                elif check.why is None and key in flipped:
                    seen_on, tests = flipped[key]
                    mine = [t for t in tests if t in task.PASS_TO_PASS]
                    if mine:
                        check = replace(check, task=_without_flipped(task, mine, seen_on))
                checks[task.instance_id] = check
                if check.why is not None:
                    log(f"{task.instance_id}: rejected: {check.why}")
    return checks
