"""How an eval run shows its progress: a rich bar on a terminal, plain lines anywhere else
(logs, CI). A :class:`Reporter` takes the run's results as well as its lines; its ``message``
is a :data:`repogym.progress.Progress`."""

from __future__ import annotations

import sys
import time
from typing import Any, Protocol

from repogym.agents.evaluation.rows import ResultRow


class Reporter(Protocol):
    def start(self, total: int, skipped: int) -> None: ...

    def message(self, text: str) -> None: ...

    def result(self, row: ResultRow) -> None: ...

    def close(self) -> None: ...


def _verdict(row: ResultRow) -> str:
    if row.get("error_kind"):
        return f"{row['error_kind']} error: {row.get('error')}"
    return "resolved" if row.get("resolved") else "not resolved"


class Quiet:
    def start(self, total: int, skipped: int) -> None:
        pass

    def message(self, text: str) -> None:
        pass

    def result(self, row: ResultRow) -> None:
        pass

    def close(self) -> None:
        pass


class PlainLines:
    """One line per finished task on standard error."""

    def __init__(self) -> None:
        self.total = self.done = self.resolved = 0
        self.started = time.monotonic()

    def start(self, total: int, skipped: int) -> None:
        self.total, self.started = total, time.monotonic()
        note = f" ({skipped} already in results.jsonl, skipped)" if skipped else ""
        self.message(f"{total} tasks to run{note}")

    def message(self, text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    def result(self, row: ResultRow) -> None:
        self.done += 1
        self.resolved += bool(row.get("resolved"))
        elapsed = time.monotonic() - self.started
        self.message(f"[{self.done}/{self.total}] {row['instance_id']}: {_verdict(row)} "
                     f"({self.resolved} resolved, {elapsed:.0f} s)")

    def close(self) -> None:
        pass


class RichBar(PlainLines):
    """A rich progress bar; finished tasks still print a line above it."""

    def __init__(self) -> None:
        super().__init__()
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.progress import Progress as Bar

        self.bar = Bar(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                       TimeElapsedColumn(), TimeRemainingColumn(), transient=False,
                       console=Console(stderr=True))
        self.task_id: Any = None

    def start(self, total: int, skipped: int) -> None:
        super().start(total, skipped)
        self.bar.start()
        self.task_id = self.bar.add_task("eval", total=total)

    def message(self, text: str) -> None:
        self.bar.console.print(text, markup=False, highlight=False)

    def result(self, row: ResultRow) -> None:
        super().result(row)
        self.bar.update(self.task_id, advance=1,
                        description=f"eval ({self.resolved} resolved)")

    def close(self) -> None:
        self.bar.stop()


def make_progress(quiet: bool = False) -> Reporter:
    """A rich bar when rich is installed and standard error is a terminal, else plain lines."""
    if quiet:
        return Quiet()
    if sys.stderr.isatty():
        try:
            return RichBar()
        except ImportError:
            pass
    return PlainLines()
