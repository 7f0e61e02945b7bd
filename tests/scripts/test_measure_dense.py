"""The measurement of dense credit: partial patches made from a gold patch, and the rank
correlation it reports (the Docker part runs as ``python -m repogym.scripts.measure_dense``)."""

from __future__ import annotations

import pytest

from repogym.scripts.measure_dense import drop_hunks, file_diff, ranks, spearman

BEFORE = "".join(f"line {i}\n" for i in range(30))
AFTER = BEFORE.replace("line 2\n", "line two\n").replace("line 25\n", "line 25\nmore\n")


def test_dropping_hunks_leaves_each_other_hunk_applied() -> None:
    patch = file_diff("a.txt", BEFORE, AFTER)
    first, second = drop_hunks(patch)
    assert "+more" in first and "+line two" not in first
    assert "+line two" in second and "+more" not in second
    assert first.startswith("diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@")
    assert drop_hunks(first) == []  # one hunk: nothing to drop


def test_spearman_with_ties_and_constant_sides() -> None:
    assert ranks([0.5, 0.1, 0.5, 0.9]) == [2.5, 1.0, 2.5, 4.0]
    assert spearman([0.1, 0.4, 0.8], [0.0, 0.5, 1.0]) == 1.0
    assert spearman([0.8, 0.4, 0.1], [0.0, 0.5, 1.0]) == -1.0
    assert spearman([0.2, 0.2, 0.2], [0.0, 0.5, 1.0]) is None
    assert spearman([0.1, 0.4, 0.8, 0.9], [0.0, 0.5, 0.5, 1.0]) == pytest.approx(0.949, 0.01)
