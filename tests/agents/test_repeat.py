"""`repogym eval --repeat N`: how stable each task's verdict is over N runs."""

from __future__ import annotations

from typing import Any

from repogym.agents.evaluation.repeat import format_stability, stability


def _row(resolved: bool, error: str | None = None) -> dict[str, Any]:
    return {"resolved": resolved, "error_kind": error}


def test_a_verdict_that_changes_between_runs_is_unstable() -> None:
    runs = [{"a": _row(True), "b": _row(True), "c": _row(False, "infrastructure")},
            {"a": _row(True), "b": _row(False), "c": _row(True)},
            {"a": _row(True), "b": _row(True), "c": _row(True)}]
    found = stability(runs)
    assert found["stable"] == 2 and found["tasks"] == 3
    assert found["unstable"] == {"b": "resolved in 2 of 3 runs"}
    assert found["per_task"]["c"] == {"runs": 3, "graded": 2, "resolved": 2, "stable": True,
                                      "verdicts": ["R", "R"], "errors": ["infrastructure"]}
    assert found["resolved_rate_per_run"] == [1.0, round(2 / 3, 4), 1.0]
    text = format_stability({"out": "o", "repeat": 3, "resolved_per_run": [2, 2, 3],
                             "n_counted_per_run": [2, 3, 3],
                             "stability": {k: v for k, v in found.items() if k != "per_task"}})
    assert "2 of 3 tasks gave the same verdict" in text and "unstable: b" in text
