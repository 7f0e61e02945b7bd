"""Canary tests planted by the harness at grading time.

One must pass and one must fail. Code under test runs inside the test process and can tamper
with the runner (force passes, skip everything, exit early); a run in which a canary does not
behave is invalid. Their names look like the repository's own tests, so nothing can single
them out by name.
"""

from __future__ import annotations

import posixpath
import random
from dataclasses import dataclass

_WORDS = (
    "roundtrip", "defaults", "edge_cases", "regression", "empty_input", "unicode", "ordering",
    "nested", "boundaries", "large_values", "repr", "equality", "copy", "errors", "parsing",
)


@dataclass(frozen=True)
class Canaries:
    path: str
    passing: str
    failing: str
    source: str

    @property
    def ids(self) -> dict[str, str]:
        """Node id -> the status it must have."""
        return {f"{self.path}::{self.passing}": "PASSED", f"{self.path}::{self.failing}": "FAILED"}


def make_canaries(test_files: list[str], existing: set[str], rng: random.Random) -> Canaries:
    folder = posixpath.dirname(test_files[0]) if test_files else "tests"
    for _ in range(100):
        a, b = rng.sample(_WORDS, 2)
        path = posixpath.join(folder, f"test_{a}_{b}.py") if folder else f"test_{a}_{b}.py"
        if path not in existing:
            break
    x, y = rng.sample(_WORDS, 2)
    passing, failing = f"test_{x}", f"test_{y}"
    n = rng.randint(3, 97)
    source = (
        f"def {passing}():\n    assert sum(range({n})) == {n * (n - 1) // 2}\n\n\n"
        f"def {failing}():\n    assert sorted([{n}, 1]) == [{n}, 1]\n"
    )
    return Canaries(path, passing, failing, source)


def canary_problems(canaries: Canaries, statuses: dict[str, str]) -> list[str]:
    return [
        f"canary {node} expected {want}, got {statuses.get(node, 'MISSING')}"
        for node, want in canaries.ids.items()
        if statuses.get(node) != want
    ]
