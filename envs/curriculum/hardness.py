"""What makes a task hard, from what is known when it is made: the gold patch (its size, the
files and functions it touches), the hidden tests that must turn (FAIL_TO_PASS) and how long
its tests run. An order over these is the ``difficulty`` sampler's curriculum."""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from repogym.schema import Task

# a definition on a changed line, in the languages repogym grades
DEFINITION = re.compile(r"^\s*(?:async\s+def|def|class|func|fn|function|(?:pub\s+)?fn)\s+"
                        r"([A-Za-z_][\w]*)|^\s*(?:public|private|protected|static|\s)+[\w<>\[\]"
                        r",\s]+\s+([A-Za-z_]\w*)\s*\(")


@dataclass(frozen=True)
class Difficulty:
    """The features of one task; larger is harder for each."""

    patch_lines: int  # lines the gold patch adds and removes
    files: int  # files it touches
    functions: int  # functions and classes it touches (hunk contexts and changed definitions)
    fail_to_pass: int  # hidden tests that must turn from failing to passing
    test_seconds: float | None  # how long its tests take, when the task records it

    def values(self) -> tuple[float | None, ...]:
        return (self.patch_lines, self.files, self.functions, self.fail_to_pass,
                self.test_seconds)


def features(task: Task) -> Difficulty:
    lines = files = 0
    functions: set[tuple[str, str]] = set()
    try:
        patch = PatchSet(task.patch) if task.patch.strip() else PatchSet("")
    except UnidiffParseError:
        patch = PatchSet("")
    for changed in patch:
        files += 1
        lines += changed.added + changed.removed
        for hunk in changed:
            header = DEFINITION.search(hunk.section_header or "")
            if header:
                functions.add((changed.path, header.group(1) or header.group(2)))
            for line in hunk:
                if line.is_added or line.is_removed:
                    found = DEFINITION.search(line.value)
                    if found:
                        functions.add((changed.path, found.group(1) or found.group(2)))
    return Difficulty(lines, files, len(functions), len(task.FAIL_TO_PASS), test_seconds(task))


def test_seconds(task: Task) -> float | None:
    """``test_seconds`` of the task's record when a source wrote it; else the median grading
    time of its certificate's runs (``tasks certify``), else unknown."""
    given = task.extra.get("test_seconds")
    if isinstance(given, (int, float)):
        return float(given)
    attacks = (task.certificate or {}).get("attacks") or {}
    runs = [a["seconds"] for a in attacks.values()
            if isinstance(a, dict) and isinstance(a.get("seconds"), (int, float))]
    return float(statistics.median(runs)) if runs else None


def order(tasks: Sequence[Task]) -> list[Task]:
    """Easy to hard: the mean over features of each task's rank among the tasks (a feature
    a task does not know is left out of its mean); ties keep the suite's order."""
    table = [features(t).values() for t in tasks]
    ranks: list[list[float]] = [[] for _ in tasks]
    for column in zip(*table, strict=True):
        known = sorted({v for v in column if v is not None})
        if len(known) < 2:
            continue  # a feature every task shares says nothing
        place = {v: i / (len(known) - 1) for i, v in enumerate(known)}
        for i, v in enumerate(column):
            if v is not None:
                ranks[i].append(place[v])
    score = [sum(r) / len(r) if r else 0.0 for r in ranks]
    return [t for _, _, t in sorted(zip(score, range(len(tasks)), tasks, strict=True),
                                    key=lambda x: (x[0], x[1]))]
