"""One candidate's selective check in its snapshot's image (see ``repogym.tasks.checking``):
the tests its change reaches and a sample of the others, run ``runs`` times on its side; a
rejection when none of them fails; else one full run that gives the lists.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from repogym.envs.grading.grader import GradingReport
from repogym.schema import Task
from repogym.tasks.batches import Member, Shared, inconsistency
from repogym.tasks.coverage import Change, CoverageMap, changed_functions, combine
from repogym.tasks.sources.common import run_git
from repogym.tasks.sources.pyast import library_files
from repogym.tasks.validate import flaky_tests, measured_lists, no_f2p_reason, run_problem

if TYPE_CHECKING:
    from repogym.tasks.checking import Baseline, Checker


class Candidate:
    """One shared-image candidate's selective check (see the module docstring)."""

    def __init__(self, checker: Checker, task: Task, base: Baseline, broken: str,
                 change: Change) -> None:
        self.c, self.task, self.base, self.broken, self.change = (
            checker, task, base, broken, change)
        self.image_task = image_task(task)

    def check(self) -> tuple[Task | None, str]:
        base, opts = self.base, self.c.options
        assert base.coverage is not None
        every = len(base.coverage.tests)
        # a tenth of the tests a change does not reach, at most ``sample`` of them
        size = min(opts.sample, max(2, every // 10))
        affected, sample = base.coverage.selection(self.change, size, opts.seed)
        if affected is not None and not affected:
            self.c.count("rejected: no test reaches the change")
            return None, no_f2p_reason(self.base.runs[0])
        if affected is None or 2 * len(affected) >= every:
            self.c.count("candidates run in full (change reaches everywhere)")
            everywhere = self.change.everywhere if affected is None else ""
            return self.full(f"{len(affected)} of {every} tests reached" if affected else
                             f"all {every} tests may reach it" +
                             (f": {everywhere}" if everywhere else ""))
        selected = sorted(affected | set(sample))
        # the confirming full run is the last of the ``runs`` runs of the selected tests
        runs = [self.run(selected) for _ in range(max(1, opts.runs - 1))]
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
        flaky = flaky_of(base.runs) | flaky_of(runs)
        f2p, _ = measured_lists(runs[0].statuses, {t: after.get(t, "") for t in selected}, flaky)
        if not f2p:
            self.c.count("rejected after selected runs")
            return None, no_f2p_reason(self.base.runs[0])
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
        """A full run shared with other kept candidates of the snapshot when it confirms them
        all (``repogym.tasks.batches``), else one of its own."""
        member = Member(self.task.instance_id, self.broken, frozenset(affected), {
            t: {r.statuses[t] for r in selected if t in r.statuses}
            for t in set().union(*(r.statuses for r in selected))})
        shared = self.c.batches.confirm(
            self.base.image, member,
            lambda patch: self.c.grade(self.image_task, patch, self.base.image, None))
        if shared is not None:
            why = inconsistency(shared, self.base.runs)
            if why is None:
                return self.from_shared(shared, member, selected)
            self.c.count("shared confirming runs that confirmed nobody")
            self.c.log(f"{self.task.instance_id}: confirmed alone ({why})")
        return self.alone(selected, affected)

    def from_shared(self, shared: Shared, member: Member, selected: list[GradingReport]
                    ) -> tuple[Task | None, str]:
        """The lists of the member's own full run: its selected tests' outcomes from the
        shared run (where only its change reaches them), the snapshot's everywhere else."""
        self.c.count("candidates confirmed by a shared full run")
        after = self.base.runs[0].statuses
        mine = shared.outcomes(member)
        flaky = flaky_of(self.base.runs) | flaky_partial([mine, *(r.statuses for r in selected)])
        f2p, p2p = measured_lists({**after, **mine}, after, flaky)
        if not f2p:
            return None, no_f2p_reason(self.base.runs[0])
        extra = {**self.task.extra, "checked": {
            "image": self.base.image, "reached": len(member.affected), "missed": [],
            "confirmed_with": [m.instance_id for m in shared.members
                               if m.instance_id != member.instance_id]}}
        return self.task.with_(FAIL_TO_PASS=tuple(f2p), PASS_TO_PASS=tuple(p2p),
                               extra=extra), "ok"

    def alone(self, selected: list[GradingReport], affected: set[str]
              ) -> tuple[Task | None, str]:
        """One full run; the lists come from it (and the partial runs, for flakiness)."""
        confirm = self.run(None)
        problem = run_problem([confirm], self.base.runs) or self.not_applied([confirm])
        if problem:
            return None, problem
        after = self.base.runs[0].statuses
        # a test the change does not reach that moved in this one run ran the same code as on
        # the snapshot: its flip is the machine's (mistune's near-linear timing tests, at a
        # load of 400, were FAIL_TO_PASS and every attack that changed nothing "passed" one),
        # or code the map cannot see. Either way it is left out of both lists.
        missed = sorted(t for t in after if t not in affected
                        and confirm.statuses.get(t) != after.get(t))
        flaky = flaky_of(self.base.runs) | flaky_partial(
            [confirm.statuses, *(r.statuses for r in selected)]) | set(missed)
        f2p, p2p = measured_lists(confirm.statuses, after, flaky)
        self.c.count("candidates confirmed by a full run")
        if missed:
            self.c.count("confirm runs that found tests the map missed")
            self.c.log(f"{self.task.instance_id}: the full run moved tests the map did not "
                       f"select, left out of the lists: {missed[:3]}")
        if not f2p:
            return None, no_f2p_reason(self.base.runs[0])
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
        flaky = flaky_of(self.base.runs) | flaky_of(runs)
        f2p, p2p = measured_lists(runs[0].statuses, self.base.runs[0].statuses, flaky)
        if not f2p:
            return None, no_f2p_reason(self.base.runs[0])
        extra = {**self.task.extra, "checked": {"image": self.base.image, "full": why}}
        return self.task.with_(FAIL_TO_PASS=tuple(f2p), PASS_TO_PASS=tuple(p2p),
                               extra=extra), "ok"


# ---------------------------------------------------------------------------- helpers


def image_task(task: Task) -> Task:
    """What builds a shareable candidate's snapshot image: its task at the snapshot."""
    return task.with_(base_commit=task.extra["original_commit"], patch="", FAIL_TO_PASS=(),
                      PASS_TO_PASS=())


def shareable(task: Task) -> bool:
    """A candidate that is its snapshot plus a change to library files only."""
    return (task.kind in ("replication", "synthetic") and not task.test_patch.strip()
            and bool(task.extra.get("original_commit")) and bool(task.source))


def flaky_of(runs: list[GradingReport]) -> set[str]:
    return flaky_tests([r.statuses for r in runs])


def flaky_partial(runs: list[dict[str, str]]) -> set[str]:
    """Tests whose outcome differs between the runs that ran them."""
    seen: dict[str, set[str]] = {}
    for run in runs:
        for test, status in run.items():
            seen.setdefault(test, set()).add(status)
    return {t for t, statuses in seen.items() if len(statuses) > 1}


def diff(task: Task, old: str, new: str) -> str:
    return run_git(Path(task.source or "."), "diff", "--no-color", "--no-ext-diff", "--binary",
                   "--no-renames", old, new)


def change(task: Task, head: str) -> Change:
    """The functions of the snapshot (``head``) that the candidate's change touches."""
    repo = Path(task.source or ".")
    paths = run_git(repo, "diff", "--name-only", "--no-renames", "-z", head, task.base_commit)
    changes = []
    for path in sorted(p for p in paths.split("\0") if p):
        mapped = run_git(repo, "show", f"{head}:{path}", check=False)
        other = run_git(repo, "show", f"{task.base_commit}:{path}", check=False)
        changes.append(changed_functions(path, mapped, other))
    return combine(changes)


def library(task: Task) -> list[str]:
    out = run_git(Path(task.source or "."), "ls-tree", "-r", "-z", "--name-only",
                  task.base_commit)
    return library_files(p for p in out.split("\0") if p)


def imports_from_testbed(task: Task, coverage: CoverageMap) -> tuple[bool, str]:
    """Whether the tests run the repository's own library files (so a change applied to
    ``/testbed`` is what they run), and if not, why."""
    elsewhere = {name: path for name, path in coverage.modules.items()
                 if path and not path.startswith("/testbed/")}
    if elsewhere:
        return False, f"the tests import {sorted(elsewhere.items())[:2]}, not /testbed"
    if not coverage.reached_files() & set(library(task)):
        return False, "no test runs a library file of /testbed"
    return True, ""
