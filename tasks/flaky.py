"""Flaky tests as data: a test that flipped during validation leaves the task's lists, the
task stays.

A test whose status differs between runs of one side (gold, or the empty patch) cannot decide
a grade: an agent would be rewarded or not by chance. Rejecting the whole task for it throws
away every other test (sympy__sympy-13146: two flaky PASS_TO_PASS tests of several hundred).
So validation records, in the task, which tests flipped and how often (``flaky_tests``: each
test's statuses counted per side), leaves them out of FAIL_TO_PASS and PASS_TO_PASS with the
reason in ``dropped_tests``, as tests that need the network are, and validates the task again
without them. Tests that flip then too are dropped in the same way, a few rounds at most; a
task left with no FAIL_TO_PASS test is rejected, saying so.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from repogym.envs.grading.grader import Grader
from repogym.schema import Task
from repogym.tasks.validate import Validation, validate_task

ROUNDS = 2  # validations again after dropping flaky tests, at most


def describe(counts: dict[str, dict[str, int]]) -> str:
    """``gold PASSED 1, FAILED 1 of 2 runs`` for each side where the test flipped."""
    parts = []
    for side, seen in counts.items():
        if len(seen) > 1:
            total = sum(seen.values())
            parts.append(f"{side} " + ", ".join(f"{s} {n}" for s, n in sorted(seen.items()))
                         + f" of {total} runs")
    return "; ".join(parts) or "flipped between validations"


def merge(into: dict[str, dict[str, dict[str, int]]],
          flips: dict[str, dict[str, dict[str, int]]]) -> None:
    """Adds one validation's counts to the counts so far."""
    for test, sides in flips.items():
        for side, seen in sides.items():
            counted = into.setdefault(test, {}).setdefault(side, {})
            for status, n in seen.items():
                counted[status] = counted.get(status, 0) + n


def without_flaky(task: Task, result: Validation, runs: int = 2,
                  grader: Grader | None = None) -> tuple[Task, Validation]:
    """``task`` less the listed tests that flipped in ``result`` (recorded with how often),
    validated again; unchanged when no listed test flipped."""
    counts: dict[str, dict[str, dict[str, int]]] = copy.deepcopy(
        task.extra.get("flaky_tests") or {})
    merge(counts, result.flips)
    for _ in range(ROUNDS):
        flaky = set(result.flaky_listed(task))
        if not flaky:
            break
        f2p = tuple(t for t in task.FAIL_TO_PASS if t not in flaky)
        if not f2p:
            return task, replace(result, reason=(
                f"every FAIL_TO_PASS test is flaky ({len(flaky)}: "
                f"{describe(counts[sorted(flaky)[0]])})"))
        dropped: dict[str, Any] = dict(task.extra.get("dropped_tests") or {})
        dropped.update({t: f"flaky: flipped during validation ({describe(counts[t])})"
                        for t in sorted(flaky)})
        task = Task.from_dict({**task.to_dict(), "FAIL_TO_PASS": list(f2p),
                               "PASS_TO_PASS": [t for t in task.PASS_TO_PASS if t not in flaky],
                               "dropped_tests": dropped, "flaky_tests": counts})
        result = validate_task(task, runs=runs, grader=grader)
        merge(counts, result.flips)
    if counts:
        task = Task.from_dict({**task.to_dict(), "flaky_tests": counts})
    return task, result
