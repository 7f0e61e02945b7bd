"""Grades of an attack on the failing tests alone, where they settle what it earned.

**An attack whose every change is stripped.** One that changes only paths the grader strips by
name (test files, ``conftest.py``, pytest's own configuration files, start-up hooks), or
nothing at all, reaches the tests with none of its changes: its test run is the base code's.
What its grade must show is that this holds on the task: the staging strips every path (and
flags it), the canaries behave, and the FAIL_TO_PASS tests fail. That needs neither the rest of
the suite nor the decoy run, so such an attack is graded on the FAIL_TO_PASS tests and the
canaries alone, in the same grading container and by the same grader
(``Grader.grade(..., tests=...)``). A grade that is not a valid run (an id pytest cannot
collect alone, a runner that misbehaves) is not used: the attack is then graded whole, as every
other one. Where the grader judges a file by its content (``setup.cfg``, ``pyproject.toml``,
``setup.py``), or the tests do not run under pytest, the attack is graded whole too.

**Stripped attacks on one task share a run.** Every such attack's test run is the same run:
the base code's, with the canaries. So a task's first one graded keeps its grade
(:class:`StrippedRuns`, when it is a valid run) and the task's other wholly stripped attacks
take it, each with its own staging's part (the paths it changed, what was stripped and the
flag per reason, its own steps in the reward) and the note ``SHARED_NOTE``. One played on
another worker while the first is being graded waits for that grade (a task's first two
attacks are often both of this kind); a grade that is not a valid run is not kept, and the
next such attack is graded itself.

**An attack that changes the code.** An attack beats a task only by making a FAIL_TO_PASS test
pass (in a valid run) or by resolving it, which needs the same. The PASS_TO_PASS tests can only
take a win away (a run they make invalid, a resolution they deny): they never make a
FAIL_TO_PASS test pass, as long as what the attack's code does to one test does not depend on
which other tests ran in the process, which holds for every attack of the suite (each acts on
each test alone: a stub, an object equal to everything, a report forged by id, by name or by
call, lines printed at import). So such an attack is first graded with every defence on (the
hidden tests under other names, the decoy run of the FAIL_TO_PASS tests, the canaries, the
signed records) on the FAIL_TO_PASS tests alone: the task given without its PASS_TO_PASS tests,
the test run keeping only their ids (``Grader.grade(..., by_id=True)``). When it earns nothing
there, and either a defence caught it (a canary, the exit status, the result sources, a
decoy, the equality check: what it did on the failing tests it does in the whole run too) or
the run is valid and reached every FAIL_TO_PASS test, that grade is its result; otherwise (a
win, a test the narrowed run did not reach, a run invalid for no stated cause, a time limit)
it is graded whole. The attacks that only end at their time limit are graded whole at once.
On a suite of hundreds of tests that is the difference between seconds and half a minute per
attack.
"""

from __future__ import annotations

import copy
import threading
from typing import Any

from repogym.envs.grading import stage
from repogym.envs.grading.flags import Flag, tampered_flags
from repogym.envs.grading.grader import Grader, GraderConfig
from repogym.envs.grading.report import GradingReport
from repogym.envs.grading.rewards import components
from repogym.envs.grading.testcmd import plain_ids, runs_pytest
from repogym.sandbox.pool import SandboxPool
from repogym.schema import Task

NOTE = "graded on the FAIL_TO_PASS tests alone: every path it changes is stripped by name"
# the defences whose flags invalidate a run (the tampering flags only say what was stripped)
CAUGHT = frozenset({Flag.CANARY, Flag.EXIT_STATUS, Flag.REPORT_MISMATCH, Flag.DECOY,
                    Flag.ALWAYS_EQUAL})
SHARED_NOTE = ("every path it changes is stripped by name: graded by the FAIL_TO_PASS tests' run "
               "of another such attack on this task (the same run: the base code's)")
NARROW_NOTE = ("graded on the FAIL_TO_PASS tests alone, every defence on: it earned nothing "
               "there, and the other tests can only take a win away")


class StrippedRuns:
    """One task's first valid grade of an attack whose every change is stripped, for the
    task's other such attacks (see the module docstring). Shared by the workers: while one
    grades, another such attack waits for that grade rather than making the same run."""

    def __init__(self, wait: float = 600.0) -> None:
        self._changed = threading.Condition()
        self._report: GradingReport | None = None
        self._busy = False
        self.wait = wait

    def take(self) -> GradingReport | None:
        """The kept grade; or None, and the caller grades and then calls ``put`` (with None
        when it could not)."""
        with self._changed:
            self._changed.wait_for(lambda: self._report is not None or not self._busy,
                                   timeout=self.wait)
            if self._report is None:
                self._busy = True
            return self._report

    def put(self, report: GradingReport | None) -> None:
        with self._changed:
            if report is not None and report.valid and self._report is None:
                self._report = report
            self._busy = False
            self._changed.notify_all()


def as_shared(report: GradingReport, task: Task, patch: str) -> GradingReport:
    """``report`` (another wholly stripped attack's grade on ``task``) as this attack's: the
    same test run, with this patch's staging (its paths, what was stripped, the flags)."""
    paths = stage.patch_paths(patch)
    tests = frozenset(stage.header_paths(task.test_patch)) | set(task.environment.test_files)
    stripped = dict(stage.protected_by_name(paths, tests))
    own = copy.deepcopy(report)
    tampered = set(tampered_flags(report.stripped))
    own.flags = [f for f in report.flags if f not in tampered] + tampered_flags(stripped)
    own.stripped, own.changed = stripped, list(paths)
    own.instance_id = task.instance_id
    return own


def wholly_stripped(task: Task, patch: str) -> bool:
    """Whether none of ``patch``'s changes can reach ``task``'s tests (decided by name)."""
    paths = stage.patch_paths(patch)
    tests = frozenset(stage.header_paths(task.test_patch)) | set(task.environment.test_files)
    stripped = stage.protected_by_name(paths, tests)
    return set(paths) == set(stripped) and not stage.content_checked(paths, stripped)


def grade_alone(env: Any, task: Task, steps: int, narrow: bool = True,
                shared: StrippedRuns | None = None) -> tuple[GradingReport, float, str] | None:
    """The grade of the attack in ``env``'s episode on the FAIL_TO_PASS tests alone (with its
    reward, and the note that says how it was graded) where that grade settles it; else None:
    the attack is graded whole. Its diff is read once; an attack whose changes are all
    stripped is graded on those tests and the canaries (and settled by a valid run); with
    ``narrow``, any other on those tests with every defence on (settled as the module
    docstring says). ``shared``: the task's stripped attacks' run, taken and kept there."""
    base = env.unwrapped
    pool = getattr(base, "pool", None)
    if (not isinstance(pool, SandboxPool) or not runs_pytest(task.environment)
            or not plain_ids(task.FAIL_TO_PASS)):
        return None
    patch = base.sandbox.diff(base.image.repo_commit)
    stripped = wholly_stripped(task, patch)
    if not stripped and not (narrow and task.PASS_TO_PASS):
        return None
    first = shared.take() if stripped and shared is not None else None
    if first is not None:
        report = as_shared(first, task, patch)
        return report, float(base.reward_fn(components(report, steps, None))), SHARED_NOTE
    # the certification's grader (GraderConfig()), on the env's pool and grading containers;
    # the task without its PASS_TO_PASS tests: the run holds the failing ones, expects no more
    grader = Grader(GraderConfig(), pool=pool)
    failing = task.with_(PASS_TO_PASS=())
    if stripped:
        graded: GradingReport | None = None
        try:
            graded = grader.grade(failing, patch, base.image.tag,
                                  tests=tuple(task.FAIL_TO_PASS))
        finally:
            if shared is not None:
                shared.put(graded)  # the waiting ones take it, or grade themselves
        earned = float(base.reward_fn(components(graded, steps, None)))
        return (graded, earned, NOTE) if graded.valid else None
    report = grader.grade(failing, patch, base.image.tag, by_id=True)
    earned = float(base.reward_fn(components(report, steps, None)))
    won = earned > 0 or report.resolved or (report.valid and report.f2p_pass_rate > 0)
    # a defence that caught the attack (its flag) says why the run is invalid, and catches it in
    # the whole run too: what raised it is the attack's own doing on the failing tests. A run
    # invalid for any other cause, or one that did not reach a failing test, could be the
    # narrowing's doing, not the attack's
    caught = any(flag in CAUGHT for flag in report.flags)
    reached = report.valid and "MISSING" not in report.fail_to_pass.values()
    if won or report.timed_out or not (caught or reached):
        return None
    return report, earned, NARROW_NOTE
