"""A task's wholly stripped attacks share one grade (repogym.agents.stripped.StrippedRuns)."""

from __future__ import annotations

import threading
import time

from repogym.agents.stripped import StrippedRuns
from repogym.envs.grading.report import GradingReport


def test_a_second_attack_waits_for_the_grade_being_made_and_takes_it() -> None:
    runs = StrippedRuns()
    assert runs.take() is None  # the first grades
    got: list[GradingReport | None] = []
    waiter = threading.Thread(target=lambda: got.append(runs.take()))
    waiter.start()
    time.sleep(0.3)
    assert waiter.is_alive() and not got  # waits rather than making the same run
    report = GradingReport("t", valid=True)
    runs.put(report)
    waiter.join(5)
    assert got == [report] and runs.take() is report


def test_a_grade_that_is_not_a_valid_run_is_not_kept() -> None:
    runs = StrippedRuns()
    assert runs.take() is None
    runs.put(GradingReport("t", valid=False))
    assert runs.take() is None  # the next one grades itself
    runs.put(None)  # and could not: the one after grades too
    assert runs.take() is None


def test_a_wait_has_an_end() -> None:
    runs = StrippedRuns(wait=0.2)
    assert runs.take() is None
    start = time.monotonic()
    assert runs.take() is None  # the first never answered: grade it oneself
    assert time.monotonic() - start < 5
