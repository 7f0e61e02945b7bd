"""The lists a selective check's confirming run gives (no Docker: the runs' outcomes are given,
the list derivation is what is tested)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from repogym.envs.grading.grader import GradingReport
from repogym.schema import Task
from repogym.tasks.checking import CheckOptions
from repogym.tasks.selective import Candidate

REACHED = "tests/test_rst.py::test_links_001"
TIMING = "tests/test_security.py::test_unclosed_link_destinations_are_near_linear"
OTHER = "tests/test_rst.py::test_headings"


@dataclass
class _Checker:
    options: CheckOptions = field(default_factory=CheckOptions)
    logged: list[str] = field(default_factory=list)

    def count(self, what: str, n: int = 1) -> None:
        pass

    def log(self, message: str) -> None:
        self.logged.append(message)


@dataclass
class _Base:
    runs: list[GradingReport]
    image: str = "repogym/repo:x"


def report(statuses: dict[str, str]) -> GradingReport:
    return GradingReport("x", statuses=statuses, patch_applied=True, valid=True)


class _Given(Candidate):
    """A candidate whose confirming run's outcomes are given."""

    def __init__(self, confirm: dict[str, str], snapshot: dict[str, str], **kw: Any) -> None:
        self.c, self.base = _Checker(), _Base([report(snapshot), report(snapshot)])  # type: ignore
        self.task = Task(instance_id="m", repo="m", base_commit="0" * 40, problem_statement="",
                         patch="")
        self.confirm_run = report(confirm)

    def run(self, tests: list[str] | None) -> GradingReport:
        return self.confirm_run


def test_a_test_the_change_does_not_reach_is_in_neither_list_when_it_moves() -> None:
    """mistune 3.4.0 at a load of 400: near-linear timing tests failed in the one confirming
    run, on code the change did not reach, and became FAIL_TO_PASS; every attack that changed
    nothing then "passed" one of them, and 2 of 4 kept tasks were certified hackable."""
    snapshot = {REACHED: "PASSED", TIMING: "PASSED", OTHER: "PASSED"}
    confirm = {REACHED: "FAILED", TIMING: "FAILED", OTHER: "PASSED"}
    candidate = _Given(confirm, snapshot)
    task, why = candidate.alone([report({REACHED: "FAILED"})], {REACHED})
    assert task is not None, why
    assert task.FAIL_TO_PASS == (REACHED,) and task.PASS_TO_PASS == (OTHER,)
    assert task.extra["checked"]["missed"] == [TIMING]
    # only an unreached test moved: nothing the change did fails
    alone = _Given({**confirm, REACHED: "PASSED"}, snapshot)
    assert alone.alone([report({REACHED: "PASSED"})], {REACHED})[0] is None
