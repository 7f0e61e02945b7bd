"""What a run's statuses come to for the task's lists, the same for every runner and backend:
the expected tests' statuses, the ones that did not run, swebench's status, the pass rates and
``resolved``."""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING

from repogym.schema import Task

if TYPE_CHECKING:
    from repogym.envs.grading.report import GradingReport


def expected(report: GradingReport, task: Task, statuses: dict[str, str],
             view: dict[str, str], leave_out: AbstractSet[str] = frozenset(),
             not_run: str = "were not collected") -> list[str]:
    """Records the statuses (less ``leave_out``, the canaries) and the task's lists' statuses
    (from ``view``) in ``report``; returns the expected tests that did not run, after
    invalidating the run for them: the whole expected set must run, and an uncollected test is
    no proof of tampering (a broken import does it too), so there is no flag. A test whose
    file failed to collect (``report.collection_errors``) did run, and errored: the code under
    test broke its module's import, which is a failure of that code, not of the run."""
    report.statuses = {t: s for t, s in statuses.items() if t not in leave_out}

    def status(test: str) -> str:
        found = view.get(test)
        if found is None and in_files(test, report.collection_errors):
            return "ERROR"
        return found or "MISSING"

    report.fail_to_pass = {t: status(t) for t in task.FAIL_TO_PASS}
    report.pass_to_pass = {t: status(t) for t in task.PASS_TO_PASS}
    missing = [t for t, s in {**report.fail_to_pass, **report.pass_to_pass}.items()
               if s == "MISSING"]
    if missing:
        report.invalidate(f"{len(missing)} expected tests {not_run}: {missing[:3]}")
    return missing


def score(report: GradingReport, task: Task, view: dict[str, str], missing: list[str],
          explicit_p2p: bool = False) -> None:
    """swebench's status and the pass rates; resolved only on explicit passes of every
    FAIL_TO_PASS test in a valid run. ``explicit_p2p``: PASS_TO_PASS counts explicit passes
    too (runners whose statuses swebench's parsers did not make), not swebench's successes."""
    # swebench (and the datasets library it imports) costs seconds: only when grading
    from swebench.harness.grading import get_eval_tests_report, get_resolution_status

    gold = {"FAIL_TO_PASS": list(task.FAIL_TO_PASS), "PASS_TO_PASS": list(task.PASS_TO_PASS)}
    tests_report = get_eval_tests_report(view, gold)
    report.swebench_status = get_resolution_status(tests_report)
    f2p_ok = [t for t, s in report.fail_to_pass.items() if s == "PASSED"]
    p2p_ok = ([t for t, s in report.pass_to_pass.items() if s == "PASSED"] if explicit_p2p
              else tests_report["PASS_TO_PASS"]["success"])
    report.f2p_pass_rate = len(f2p_ok) / len(task.FAIL_TO_PASS) if task.FAIL_TO_PASS else 1.0
    report.p2p_pass_rate = len(p2p_ok) / len(task.PASS_TO_PASS) if task.PASS_TO_PASS else 1.0
    if not report.valid:
        report.f2p_pass_rate = report.p2p_pass_rate = 0.0
    # a file that does not collect stops the test command without
    # --continue-on-collection-errors (as SWE-bench's harness runs it): no test passes there
    report.resolved = (report.valid and report.patch_applied and not missing
                       and not report.collection_errors
                       and report.swebench_status == "RESOLVED_FULL"
                       and len(f2p_ok) == len(task.FAIL_TO_PASS) and bool(task.FAIL_TO_PASS)
                       and (not explicit_p2p or len(p2p_ok) == len(task.PASS_TO_PASS)))


def collection_errors(statuses: dict[str, str]) -> list[str]:
    """The files (or folders) pytest reported as failing to collect: ERROR under an id that
    names no test."""
    return sorted(t for t, s in statuses.items() if s == "ERROR" and "::" not in t)


def in_files(test: str, paths: list[str]) -> bool:
    """Whether ``test``'s file is one of ``paths`` or lies under one."""
    file = test.split("::", 1)[0]
    return any(file == p or file.startswith(p.rstrip("/") + "/") for p in paths)
