"""Task creation: seconds per tried and per kept candidate, selective checks against full runs.

The bench task's repository (at its base commit) gets the same planted-bug candidates checked
twice: by ``Checker`` through the loop of ``tasks add`` (one image for the snapshot, only the
tests a change reaches in warm containers, confirming full runs shared by kept candidates) and
the plain way, ``derive_lists`` as it was before (each candidate's own image, the whole suite
twice per side, a fresh container per run). Both
build their images afresh (the environment carries a marker of this run), so neither is
helped by the cache. The statement's extra run (synthetic tasks) is not counted for either.
"""

from __future__ import annotations

import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

from repogym.bench.core import Context, Row, compare, row
from repogym.schema import Task
from repogym.tasks.checking import Checker, CheckOptions
from repogym.tasks.sources.common import SourceOptions, WorkRepo
from repogym.tasks.sources.loop import collect
from repogym.tasks.sources.synthetic import SyntheticOptions, SyntheticSource
from repogym.tasks.validate import derive_lists


def creation_speed(ctx: Context, candidates: int) -> list[Row]:
    task = ctx.task
    if not task.source:
        return [row("creation.selective.tried", "task creation", "s", None,
                    note="the bench task has no source repository")]
    ctx.progress(f"creation: {candidates} planted bugs in {task.repo}, checked selectively "
                 "and with full runs")
    marker = f"true repogym-bench-{uuid.uuid4().hex[:8]}"  # new images for this run
    env = replace(task.environment, setup=(*task.environment.setup, marker))
    with tempfile.TemporaryDirectory(prefix="repogym-bench-creation-") as tmp:
        work = WorkRepo.create(Path(task.source), Path(tmp) / "repo", task.base_commit)
        source = SyntheticSource(work, SyntheticOptions(work.path), SourceOptions(),
                                 env, derive=lambda t: (t, ""), log=lambda _m: None)
        tasks = [t for _, t in zip(range(candidates), source.candidates(), strict=False)]
        with Checker(CheckOptions()) as checker:  # as `tasks add` runs it (shared confirm runs)
            selective, kept_a = _time_all(tasks, checker)
        full, kept_b = _time_each(tasks, lambda t: derive_lists(t, runs=2))
    rows = [
        row("creation.selective.tried", "task creation, selective: s per tried candidate", "s",
            selective),
        row("creation.full.tried", "task creation, full runs: s per tried candidate", "s", full),
        _per_kept("creation.selective.kept", "selective", selective, kept_a),
        _per_kept("creation.full.kept", "full runs", full, kept_b),
    ]
    rows = compare(rows, "creation.full.tried", "creation.selective.tried")
    return compare(rows, "creation.full.kept", "creation.selective.kept")


class _Listed:
    """The candidates made above, as a source the loop checks."""

    name = "bench"

    def __init__(self, tasks: list[Task], check: Callable[[Task], tuple[Task | None, str]]):
        self.tasks, self.check = tasks, check

    def candidates(self) -> Iterator[Task]:
        return iter(self.tasks)


def _time_all(tasks: list[Task], checker: Checker) -> tuple[list[float], int]:
    """Seconds per candidate of the loop over all of them (their checks overlap)."""
    start = time.monotonic()
    result = collect(_Listed(tasks, checker.derive), log=lambda _m: None, gate=checker.gate,
                     in_flight=checker.in_flight)
    seconds = time.monotonic() - start
    return [seconds / max(1, len(tasks))] * len(tasks), len(result.kept)


def _time_each(tasks: list[Task], derive: Callable[[Task], tuple[Task | None, str]]
               ) -> tuple[list[float], int]:
    seconds, kept = [], 0
    for task in tasks:
        start = time.monotonic()
        done, _ = derive(task)
        seconds.append(time.monotonic() - start)
        kept += done is not None
    return seconds, kept


def _per_kept(key: str, how: str, seconds: list[float], kept: int) -> Row:
    if not kept:
        return row(key, f"task creation, {how}: s per kept task", "s", None,
                   note="no candidate was kept")
    return row(key, f"task creation, {how}: s per kept task ({kept} of {len(seconds)} kept)",
               "s", [sum(seconds) / kept])
