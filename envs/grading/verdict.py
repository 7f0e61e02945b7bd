"""The verdict of a grading run: which result sources to believe, whether they agree, whether
the canaries, decoys and exit status behaved, and what the task's lists come to.

Everything here reads what the run left (the log, the JUnit file, the reporter's records, the
disguise's map back to the real ids); nothing starts a container.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from repogym.envs.grading import scoring
from repogym.envs.grading.blind import Disguise
from repogym.envs.grading.canary import Canaries, canary_problems
from repogym.envs.grading.flags import Flag
from repogym.envs.grading.reporter import Records
from repogym.envs.grading.results import (
    disagreements,
    match_cut_ids,
    parse_junit,
    parse_log,
    resolve_cut_ids,
)
from repogym.envs.grading.testcmd import pytest_args
from repogym.schema import Task

if TYPE_CHECKING:
    from repogym.envs.grading.report import GradingReport


class Verdict:
    """Decides one run's report from its results."""

    def __init__(self, report: GradingReport, task: Task, pytest: bool, records: list[Records],
                 disguise: Disguise | None):
        self.report, self.task, self.pytest = report, task, pytest
        self.records, self.disguise = records, disguise

    def judge(self, log: str, junit_xml: str, canaries: Canaries | None) -> None:
        log_status = self._unmask(parse_log(log, self.task.environment.log_parser))
        statuses = view = dict(log_status)
        if self.pytest:
            statuses, view = self._statuses(junit_xml, log, log_status, canaries)
        self._check_records()
        self._check_canaries(statuses, canaries)
        if self.report.timed_out:
            self.report.invalidate("the test run hit its time limit", Flag.TIMEOUT)
        self._check_exit(statuses, canaries)
        if self.pytest:
            self.report.collection_errors = scoring.collection_errors(statuses)
        missing = self._expected(statuses, view, canaries)
        self._score(view, missing)

    def _check_canaries(self, statuses: dict[str, str], canaries: Canaries | None) -> None:
        if not canaries:
            return
        self.report.canaries = {node: statuses.get(node, "MISSING") for node in canaries.ids}
        problems = canary_problems(canaries, statuses)
        if problems:
            self.report.invalidate("; ".join(problems), Flag.CANARY)

    def _expected(self, statuses: dict[str, str], view: dict[str, str],
                  canaries: Canaries | None) -> list[str]:
        return scoring.expected(self.report, self.task, statuses, view,
                                set(canaries.ids) if canaries else set())

    def _score(self, view: dict[str, str], missing: list[str]) -> None:
        scoring.score(self.report, self.task, view, missing)

    def _unmask(self, statuses: dict[str, str]) -> dict[str, str]:
        return self.disguise.unmask(statuses) if self.disguise is not None else statuses

    def _statuses(self, junit_xml: str, log: str, log_status: dict[str, str],
                  canaries: Canaries | None) -> tuple[dict[str, str], dict[str, str]]:
        """(the statuses by whole id, the same with the task's cut ids added), under the real
        ids, both empty when the sources disagree. The reporter's records come first, JUnit
        when there is no reporter; the other sources must agree with them. JUnit names every
        test whole; SWE-bench's lists hold ids as its log parser cuts them (at a space): each
        such id stands for the tests whose cut id it is (see ``results.match_cut_ids``)."""
        report, task = self.report, self.task
        parser = task.environment.log_parser
        if self._strays(junit_xml, log):
            return {}, {}
        records = self.records[0] if self.records else None
        # the ids under their names in the run, to read JUnit's inherited methods by
        known = records.statuses if records is not None else parse_log(log, parser)
        junit = self._unmask(parse_junit(junit_xml, known))
        if not junit and log_status and report.exit_code in (0, 1):
            report.invalidate("pytest wrote no JUnit file: the test command did not pass the "
                              "harness's options on to pytest", Flag.REPORT_MISMATCH)
            return {}, {}
        primary = self._unmask(records.statuses) if records is not None else junit
        if records is not None and not primary and (junit or log_status):
            report.invalidate("the harness's reporter received no results although the tests "
                              "ran", Flag.REPORT_MISMATCH)
            return {}, {}
        expected = [*task.FAIL_TO_PASS, *task.PASS_TO_PASS]
        ids = expected + (list(canaries.ids) if canaries else [])
        view = resolve_cut_ids(primary, match_cut_ids(expected, primary, parser))
        # the log as its parser reads it, with the listed cut ids its whole ids stand for
        log_view = resolve_cut_ids(log_status, match_cut_ids(expected, log_status, parser))
        mismatch = disagreements(view, log_view, ids, parser)
        if records is not None:
            junit_view = resolve_cut_ids(junit, match_cut_ids(expected, junit, parser))
            mismatch += [t for t in disagreements(view, junit_view, ids, parser)
                         if t not in mismatch]
        if mismatch:
            report.invalidate(f"the test results' sources disagree on {mismatch[:5]}",
                              Flag.REPORT_MISMATCH)
            return {}, {}
        return primary, view

    def _strays(self, junit_xml: str, log: str) -> bool:
        """Whether a source holds results for the hidden tests' original ids in the test run,
        which collects them only under other names."""
        if self.disguise is None:
            return False
        named = [w for w in pytest_args(self.task.environment.test_cmd) or []
                 if not w.startswith("-")]
        reporter = [records.statuses for records in self.records[:1]]
        sources = [parse_junit(junit_xml, *reporter),
                   parse_log(log, self.task.environment.log_parser), *reporter]
        found = sorted({n for s in sources for n in self.disguise.strays(s, named)})
        if found:
            self.report.invalidate(f"results for tests the run did not collect: {found[:3]}",
                                   Flag.REPORT_MISMATCH)
        return bool(found)

    def _check_records(self) -> None:
        """Records that did not verify, and values whose ``==`` is always true."""
        report = self.report
        found: dict[str, str] = {}
        for run, records in enumerate(self.records):
            problems = records.problems()
            if problems and not report.timed_out:
                report.invalidate("; ".join(problems), Flag.REPORT_MISMATCH)
            found.update(self._unmask(records.always_equal) if run == 0 else
                         records.always_equal)
        if found:
            types = sorted(set(found.values()))
            report.invalidate(f"objects equal to anything, made by the package's code or "
                              f"compared by the tests, in {len(found)} tests (e.g. "
                              f"{sorted(found)[0]}): {types[:3]}", Flag.ALWAYS_EQUAL)

    def _check_exit(self, statuses: dict[str, str], canaries: Canaries | None) -> None:
        report = self.report
        if not self.pytest or report.timed_out or report.exit_code is None:
            return
        failing = [t for t, s in statuses.items() if s in ("FAILED", "ERROR")]
        if report.exit_code == 0 and (failing or canaries):
            report.invalidate(f"pytest exited 0 although {len(failing)} tests failed",
                              Flag.EXIT_STATUS)
        elif report.exit_code == 1 and not failing:
            report.invalidate("pytest exited 1 but no test failed", Flag.EXIT_STATUS)
        elif report.exit_code not in (0, 1):
            flag = Flag.EXIT_STATUS if canaries and not statuses else None
            report.invalidate(f"pytest exited {report.exit_code} (interrupted, internal or "
                              "usage error)", flag)
