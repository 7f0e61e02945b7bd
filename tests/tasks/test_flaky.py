"""Flaky tests as data: what flipped during validation leaves the lists with how often, and
the task stays (sympy__sympy-13146 was thrown away for two flaky PASS_TO_PASS tests)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from repogym.envs.grading.report import GradingReport
from repogym.schema import Task
from repogym.tasks import flaky, validate
from repogym.tasks.played import Played
from repogym.tasks.validate import Validation

F2P, P2P, WOBBLY, OTHER = "t.py::test_fix", "t.py::test_old", "t.py::test_wobbly", "t.py::x"
TIMED_OUT = "(the run timed out)"  # a key of a run's statuses below: the run was stopped
SECONDS = "(seconds)"  # another: how long the run's tests took


def _task() -> Task:
    return Task(instance_id="demo-1", repo="o/r", base_commit="c" * 40, problem_statement="p",
                patch="diff", FAIL_TO_PASS=(F2P,), PASS_TO_PASS=(P2P, WOBBLY))


def _report(task: Task, statuses: dict[str, str]) -> GradingReport:
    """A run's report, resolved as the scorer would for these statuses."""
    f2p = {t: statuses.get(t, "MISSING") for t in task.FAIL_TO_PASS}
    p2p = {t: statuses.get(t, "MISSING") for t in task.PASS_TO_PASS}
    timed_out = statuses.pop(TIMED_OUT, None) is not None
    seconds = float(statuses.pop(SECONDS, 1))
    resolved = all(s == "PASSED" for s in {**f2p, **p2p}.values()) and not timed_out
    return GradingReport(task.instance_id, resolved=resolved, patch_applied=True,
                         fail_to_pass=f2p, pass_to_pass=p2p, statuses=dict(statuses),
                         timed_out=timed_out, valid=not timed_out, test_seconds=seconds)


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, str]]]:
    """The statuses the next runs report, in order (gold runs, then empty runs)."""
    queue: list[dict[str, str]] = []

    def grade_played(task: Task, n: int, _grader: Any) -> tuple[list[GradingReport], Played]:
        return [_report(task, dict(queue.pop(0))) for _ in range(n)], Played("diff")

    def grade(task: Task, _patch: str, n: int, _grader: Any) -> list[GradingReport]:
        return [_report(task, dict(queue.pop(0))) for _ in range(n)]

    monkeypatch.setattr(validate, "_grade_played", grade_played)
    monkeypatch.setattr(validate, "_grade", grade)
    yield queue
    assert not queue, "runs left over"


GOOD = {F2P: "PASSED", P2P: "PASSED", WOBBLY: "PASSED", OTHER: "PASSED"}
EMPTY = {F2P: "FAILED", P2P: "PASSED", WOBBLY: "PASSED", OTHER: "PASSED"}


def test_a_flaky_test_no_list_names_rejects_nothing(runs: list[dict[str, str]]) -> None:
    runs += [GOOD, {**GOOD, OTHER: "FAILED"}, EMPTY, EMPTY]
    result = validate.validate_task(_task(), runs=2, grader=object())  # type: ignore[arg-type]
    assert result.ok, result.reason
    assert result.flaky == [OTHER]
    assert result.flips[OTHER] == {"gold": {"PASSED": 1, "FAILED": 1}, "empty": {"PASSED": 2}}


def test_a_listed_flaky_test_is_dropped_with_how_often(runs: list[dict[str, str]]) -> None:
    task = _task()
    runs += [GOOD, {**GOOD, WOBBLY: "FAILED"}, EMPTY, EMPTY]  # the first validation
    first = validate.validate_task(task, runs=2, grader=object())  # type: ignore[arg-type]
    assert not first.ok and first.reason.startswith("gold does not resolve")
    assert "flaky tests: ['t.py::test_wobbly']" in first.reason
    runs += [GOOD, GOOD, EMPTY, EMPTY]  # the validation without it
    kept, result = flaky.without_flaky(task, first, runs=2,
                                       grader=object())  # type: ignore[arg-type]
    assert result.ok, result.reason
    assert kept.PASS_TO_PASS == (P2P,) and kept.FAIL_TO_PASS == (F2P,)
    assert kept.extra["flaky_tests"][WOBBLY] == {"gold": {"PASSED": 1, "FAILED": 1},
                                                 "empty": {"PASSED": 2}}
    assert kept.extra["dropped_tests"][WOBBLY] == (
        "flaky: flipped during validation (gold FAILED 1, PASSED 1 of 2 runs)")
    assert Task.from_dict(kept.to_dict()).extra["flaky_tests"] == kept.extra["flaky_tests"]


def test_a_task_whose_every_fail_to_pass_test_flips_is_rejected(
        runs: list[dict[str, str]]) -> None:
    task = _task()
    runs += [GOOD, {**GOOD, F2P: "FAILED"}, EMPTY, EMPTY]
    first = validate.validate_task(task, runs=2, grader=object())  # type: ignore[arg-type]
    kept, result = flaky.without_flaky(task, first, runs=2,
                                       grader=object())  # type: ignore[arg-type]
    assert not result.ok and result.reason.startswith("every FAIL_TO_PASS test is flaky")
    assert kept is task


def test_gold_failing_in_every_run_runs_again_and_a_test_passing_by_chance_is_flaky(
        runs: list[dict[str, str]]) -> None:
    """sympy__sympy-13146: its FAIL_TO_PASS test fails with gold under 3 hash seeds of 8, and
    did in both validation runs: rejected as gold not resolving it. Two runs more show it
    passing too: flaky, which names the upstream fault, not a failure of the fix."""
    task = _task()
    failing = {**GOOD, F2P: "ERROR"}
    runs += [failing, failing, GOOD, failing, EMPTY, EMPTY]  # 2 runs, 2 more, then empty's 2
    first = validate.validate_task(task, runs=2, grader=object())  # type: ignore[arg-type]
    assert first.gold_resolved == [False, False, True, False]
    assert first.flips[F2P]["gold"] == {"ERROR": 3, "PASSED": 1}
    kept, result = flaky.without_flaky(task, first, runs=2,
                                       grader=object())  # type: ignore[arg-type]
    assert kept is task and result.reason == (
        "every FAIL_TO_PASS test is flaky (1: gold ERROR 3, PASSED 1 of 4 runs)")
    # failing in the runs more as well: gold does not resolve it
    runs += [failing] * 4 + [EMPTY, EMPTY]
    again = validate.validate_task(task, runs=2, grader=object())  # type: ignore[arg-type]
    assert again.reason.startswith("gold does not resolve it (failing: ['t.py::test_fix']")
    assert again.flaky == [] and len(again.gold_resolved) == 2 + validate.CONFIRM


def test_a_task_with_no_flaky_test_is_left_as_it_is() -> None:
    task = _task()
    result = Validation(task.instance_id, True, "ok", [True, True], [False, False], [], 1.0)
    assert flaky.without_flaky(task, result) == (task, result)


def test_a_gold_run_that_times_out_is_a_timeout_not_flaky_tests(
        runs: list[dict[str, str]]) -> None:
    """sympy__sympy-13437: one gold run of two past the limit (its last tests never ran) read
    as every FAIL_TO_PASS test flipping, and the task was rejected as flaky."""
    runs += [GOOD, {F2P: "PASSED", TIMED_OUT: ""}, EMPTY, EMPTY]
    result = validate.validate_task(_task(), runs=2, grader=object())  # type: ignore[arg-type]
    assert not result.ok and result.flaky == [] and result.flips == {}
    assert result.reason.startswith("tests time out with the gold patch (1 of 2 runs")
    kept, again = flaky.without_flaky(_task(), result, runs=2)
    assert (kept, again) == (_task(), result)  # nothing to drop: no second validation


def test_a_test_that_fails_two_ways_is_not_flaky(runs: list[dict[str, str]]) -> None:
    """sympy__sympy-13146: without the fix, its FAIL_TO_PASS test ended in ERROR in one run and
    FAILED in the other; both fail it, so the task was rejected as flaky for nothing."""
    runs += [GOOD, GOOD, {**EMPTY, F2P: "ERROR"}, EMPTY]
    result = validate.validate_task(_task(), runs=2, grader=object())  # type: ignore[arg-type]
    assert result.ok and result.flaky == [], result.reason
    assert validate.flaky_tests([{F2P: "PASSED"}, {F2P: "XFAIL"}]) == {F2P}
    assert validate.flaky_tests([{F2P: "SKIPPED"}, {}]) == set()


def test_gold_past_the_limit_is_validated_again_with_the_harnesss(
        runs: list[dict[str, str]], monkeypatch: pytest.MonkeyPatch) -> None:
    """sympy__sympy-13437: test_bell takes 427 s here; validated with 300 s, every gold run
    timed out, where SWE-bench's harness gives 1800 s. Validated again with that, kept with
    three times gold's slowest run as its limit."""
    limits: list[float] = []
    grade = validate._grade_played

    def seen(task: Task, n: int, grader: Any) -> Any:
        limits.append(task.environment.timeout)
        return grade(task, n, grader)

    monkeypatch.setattr(validate, "_grade_played", seen)
    runs += [{**GOOD, TIMED_OUT: ""}, {**GOOD, TIMED_OUT: ""}, EMPTY, EMPTY]
    first = validate.validate_task(_task(), runs=2, grader=object())  # type: ignore[arg-type]
    assert first.reason.startswith("tests time out with the gold patch (2 of 2 runs")
    runs += [{**GOOD, SECONDS: "427"}, {**GOOD, SECONDS: "380"}, EMPTY, EMPTY]
    kept, result = validate.with_longer_limit(_task(), first, 1800, runs=2,
                                              grader=object())  # type: ignore[arg-type]
    assert limits == [300, 1800] and result.ok
    assert kept.environment.timeout == 1281  # 3 x 427 s
    assert result.reason == ("ok (gold's tests take 427 s, past the limit of 300 s: the limit "
                             "is now 1281 s)")
    # still past the harness's limit: rejected as it was
    runs += [{**GOOD, TIMED_OUT: ""}, GOOD, EMPTY, EMPTY]
    assert validate.with_longer_limit(_task(), first, 1800, runs=2, grader=object()  # type: ignore[arg-type]
                                      ) == (_task(), first)
