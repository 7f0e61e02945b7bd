"""The loop that turns a source's candidates into validated tasks, on several workers.

Candidates are made in the source's order on the calling thread (making one may commit to the
working repository); ``workers`` threads check them (the checks wait on containers, so threads
overlap well), at most ``workers`` at a time. Outcomes are logged as they finish and returned in
candidate order, so the tasks written do not depend on the number of workers.

A ``Journal`` (the output folder's progress file) records each finished candidate at once; a
run that is interrupted or killed and started again takes the recorded outcomes instead of
checking those candidates again. Candidates a suite already holds are skipped without a check
(``skip``): running a command again adds only what is new.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from repogym.errors import TaskError
from repogym.schema import Task

from . import flaky_marks, heartbeat
from .common import Log, Rejected, TaskSource, log_stderr, reason_kind

if TYPE_CHECKING:
    from repogym.tasks.batches import Gate

# Consecutive infrastructure failures after which a run stops: the rest would fail alike.
MAX_INFRA_FAILURES = 3


@dataclass
class Collected:
    """What one run of a source produced."""

    kept: list[Task] = field(default_factory=list)
    outcomes: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    stopped: str | None = None  # why the run stopped early, if it did
    resumed: int = 0  # outcomes taken from the progress file of an interrupted run
    skipped: int = 0  # candidates the suite already holds

    @property
    def tried(self) -> int:
        return len(self.outcomes)

    @property
    def reasons(self) -> Counter[str]:
        return Counter(reason_kind(o["reason"]) for o in self.outcomes if not o["kept"])

    def drop(self, reasons: dict[str, str], **fields: Any) -> None:
        """Kept tasks rejected after the loop (``reasons`` by instance id): out of ``kept``,
        and their outcomes say why."""
        for outcome in self.outcomes:
            why = reasons.get(outcome["instance_id"])
            if why is not None and outcome.get("kept"):
                outcome.update(kept=False, reason=why, reason_kind=reason_kind(why), **fields)
        self.kept = [t for t in self.kept if t.instance_id not in reasons]

    def summary(self) -> str:
        rejected = self.tried - len(self.kept)
        line = f"tried {self.tried}, kept {len(self.kept)}, rejected {rejected}"
        if rejected:
            line += ": " + ", ".join(f"{r} ({n})" for r, n in self.reasons.most_common())
        if self.resumed or self.skipped:
            line += f" ({self.resumed} taken from the progress file, {self.skipped} already " \
                    "in the suite)"
        return line

    def to_dict(self) -> dict[str, Any]:
        return {
            "tried": self.tried, "kept": len(self.kept), "rejected": self.tried - len(self.kept),
            "reasons": dict(self.reasons.most_common()), "seconds": round(self.seconds, 1),
            "seconds_per_tried": round(self.seconds / self.tried, 1) if self.tried else None,
            "seconds_per_kept": round(self.seconds / len(self.kept), 1) if self.kept else None,
            "resumed": self.resumed, "skipped": self.skipped,
            "stopped": self.stopped, "candidates": self.outcomes,
        }


class Journal(Protocol):
    """Where each finished candidate is recorded the moment it finishes."""

    def earlier(self, instance_id: str) -> tuple[dict[str, Any], Task | None] | None:
        """The outcome (and kept task) an interrupted run recorded, if any."""
        ...

    def record(self, outcome: dict[str, Any], task: Task | None) -> None: ...


def collect(source: TaskSource, max_candidates: int | None = None, log: Log = log_stderr, *,
            workers: int = 1, journal: Journal | None = None,
            skip: Callable[[Task], bool] | None = None, gate: Gate | None = None,
            in_flight: int | None = None, keep: int | None = None) -> Collected:
    """Checks candidates until ``max_candidates`` were tried, ``keep`` were kept, or none are
    left. With ``keep``, no more candidates are in flight than could still be needed (were each
    kept), and none is handed out once that many were kept.

    A ``TaskError`` while checking rejects that candidate; any other error stops the run, and
    so do ``MAX_INFRA_FAILURES`` infrastructure rejections in a row (Docker is down, the image
    does not build): every later candidate would fail the same way. An interrupt (Ctrl-C) stops
    it too, keeping what was checked so far: the caller still writes it.

    ``gate`` (a checker's): at most ``workers`` checks work at once, and up to ``in_flight``
    candidates are handed out, for checks that wait on one another (a shared confirming run,
    ``repogym.tasks.batches``) step out of the gate meanwhile.
    """
    if workers < 1:
        raise ValueError(f"--workers {workers}: give at least 1.")
    if keep is not None and keep < 1:
        raise ValueError(f"--keep {keep}: give a positive number of tasks.")
    run = _Run(source, max_candidates, log, workers, journal, skip, gate,
               max(workers, in_flight or workers) if gate is not None else workers)
    run.keep = keep
    start = time.monotonic()
    try:
        run.loop()
    except KeyboardInterrupt:
        run.result.stopped = f"interrupted after {len(run.finished)} candidates"
        log(f"stopping: {run.result.stopped}; writing the "
            f"{sum(1 for _, _, t in run.finished if t)} tasks kept so far")
    finally:
        run.close()
    result = run.result
    for _, outcome, task in sorted(run.finished, key=lambda f: f[0]):
        result.outcomes.append(outcome)
        if task is not None:
            result.kept.append(task)
    result.seconds = time.monotonic() - start
    return result


def check_one(source: TaskSource, task: Task, log: Log = log_stderr, label: str = ""
              ) -> tuple[Task | None, str]:
    """One candidate's check; a long one says every so often what it is doing."""
    # a candidate checked in its snapshot's image (see repogym.tasks.checking) waits for that
    shown = task.with_(base_commit=task.extra["original_commit"]) \
        if task.extra.get("original_commit") else task
    try:
        with heartbeat.heartbeat(log, label or task.instance_id, shown):
            done, reason = source.check(task)
        if done is not None and not getattr(source, "published_lists", False):
            # tests the project marks flaky leave the lists (``flaky_marks``); a dataset's
            # own lists stay as published
            return flaky_marks.without_marked(done)
        return done, reason
    except TaskError as err:
        return None, str(err)
    except Exception as exc:  # noqa: BLE001 - a fault nobody foresaw ends this candidate only
        # (an infrastructure rejection: not journaled, so the next run tries it again, and
        # MAX_INFRA_FAILURES of them in a row stop the run)
        log(f"{label or task.instance_id}: unexpected {type(exc).__name__}:\n{_where(exc)}")
        first = (str(exc).splitlines() or [""])[0][:200]
        return None, (f"infrastructure: unexpected {type(exc).__name__}: {first} (a bug in "
                      "repogym; the next run tries this candidate again)")


def _where(exc: BaseException, frames: int = 3) -> str:
    """The last ``frames`` frames of repogym's own code the exception passed through, and the
    exception: where the fault is (the last frames alone are often a library's)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    stack = traceback.extract_tb(exc.__traceback__)
    own = [f for f in stack if os.path.abspath(f.filename).startswith(root + os.sep)
           and f"{os.sep}site-packages{os.sep}" not in f.filename[len(root):]]
    shown = "".join(traceback.format_list(own[-frames:] or stack[-frames:]))
    return (shown + "".join(traceback.format_exception_only(type(exc), exc))).strip()


def _outcome(task: Task | Rejected, done: Task | None, reason: str) -> dict[str, Any]:
    outcome: dict[str, Any] = {"instance_id": task.instance_id, "kind": task.kind,
                               "kept": done is not None, "reason": reason}
    if done is None:
        outcome["reason_kind"] = reason_kind(reason)
    if done is not None:
        outcome.update(FAIL_TO_PASS=len(done.FAIL_TO_PASS), PASS_TO_PASS=len(done.PASS_TO_PASS))
    return outcome


class _Run:
    """One run of the loop: the candidates handed out, the outcomes that came back."""

    def __init__(self, source: TaskSource, max_candidates: int | None, log: Log, workers: int,
                 journal: Journal | None, skip: Callable[[Task], bool] | None,
                 gate: Gate | None, in_flight: int) -> None:
        self.source, self.max, self.log, self.workers = source, max_candidates, log, workers
        self.journal, self.skip, self.gate, self.in_flight = journal, skip, gate, in_flight
        self.result = Collected()
        self.finished: list[tuple[int, dict[str, Any], Task | None]] = []
        self.handed = 0  # candidates handed out (tried or being tried)
        self.inflight = 0
        self.todo: queue.Queue[tuple[int, Task] | None] = queue.Queue()
        self.done: queue.Queue[tuple[int, Task, tuple[Task | None, str] | BaseException]] = (
            queue.Queue())
        self.threads: list[threading.Thread] = []
        self.stop = False
        self.keep: int | None = None  # stop handing out candidates once this many are kept

    def kept(self) -> int:
        return sum(1 for *_, t in self.finished if t)

    def label(self, index: int, task: Task) -> str:
        return f"[{index + 1}/{self.max or '?'}] {self.source.name} {task.instance_id}"

    def loop(self) -> None:
        at_once = "one at a time" if self.workers == 1 else f"{self.workers} at a time"
        self.log(f"{self.source.name}: checking candidates {at_once} (a long one reports every "
                 f"{heartbeat.EVERY:.0f} s)")
        for task in self.source.candidates():
            if self.stop or (self.max is not None and self.handed >= self.max):
                break
            if self.keep is not None:
                # no more in flight than could still be needed: were every one of them kept
                while self.inflight and self.kept() + self.inflight >= self.keep:
                    self.collect_one()
                if self.kept() >= self.keep:
                    self.log(f"{self.source.name}: {self.keep} kept, no more candidates tried "
                             "(--keep)")
                    break
            earlier = self.journal.earlier(task.instance_id) if self.journal else None
            if earlier is None and self.skip is not None and not isinstance(task, Rejected) \
                    and self.skip(task):
                self.result.skipped += 1
                continue
            index = self.handed
            self.handed += 1
            if earlier is not None:
                self.result.resumed += 1
                self.finish(index, task, earlier[1], earlier[0]["reason"], resumed=True)
            elif isinstance(task, Rejected):
                self.finish(index, task, None, task.reason)
            elif self.in_flight == 1:
                self.finish(index, task, *check_one(self.source, task, self.log,
                                                    self.label(index, task)))
            else:
                self.submit(index, task)
        while self.inflight:
            self.collect_one()

    def submit(self, index: int, task: Task) -> None:
        while self.inflight >= self.in_flight:
            self.collect_one()
        if self.stop:
            return
        if len(self.threads) < self.in_flight:
            thread = threading.Thread(target=self.work, daemon=True,
                                      name=f"repogym-check-{len(self.threads)}")
            self.threads.append(thread)
            thread.start()
        self.inflight += 1
        self.todo.put((index, task))

    def work(self) -> None:
        while True:
            item = self.todo.get()
            if item is None:
                return
            index, task = item
            try:
                with self.gate.working() if self.gate else contextlib.nullcontext():
                    answer: tuple[Task | None, str] | BaseException = check_one(
                        self.source, task, self.log, self.label(index, task))
            except BaseException as exc:  # noqa: BLE001 - handed to the main thread
                answer = exc
            self.done.put((index, task, answer))

    def collect_one(self) -> None:
        while True:
            try:  # a timeout, so that Ctrl-C reaches the main thread while it waits
                index, task, answer = self.done.get(timeout=0.5)
                break
            except queue.Empty:
                continue
        self.inflight -= 1
        if isinstance(answer, BaseException):
            self.stop = True
            raise answer
        self.finish(index, task, *answer)

    def finish(self, index: int, task: Task | Rejected, done: Task | None, reason: str,
               resumed: bool = False) -> None:
        outcome = _outcome(task, done, reason)
        self.finished.append((index, outcome, done))
        if self.journal is not None and not resumed and not reason.startswith("infrastructure"):
            self.journal.record(outcome, done)
        if done is not None:
            status = f"kept ({len(done.FAIL_TO_PASS)} F2P, {len(done.PASS_TO_PASS)} P2P)"
        else:
            status = f"rejected: {reason}"
        total = str(self.max) if self.max else "?"
        note = " (from the progress file)" if resumed else ""
        self.log(f"[{len(self.finished)}/{total}] {self.source.name} {task.instance_id}: "
                 f"{status}{note}")
        recent = [o["reason"] for _, o, _ in self.finished[-MAX_INFRA_FAILURES:]]
        if len(recent) == MAX_INFRA_FAILURES and all(r.startswith("infrastructure")
                                                     for r in recent):
            self.result.stopped = f"{MAX_INFRA_FAILURES} infrastructure failures in a row: {reason}"
            self.log(f"stopping: {self.result.stopped}")
            self.stop = True

    def close(self) -> None:
        """Ends idle workers; busy ones are daemons and end with the process."""
        for _ in self.threads:
            self.todo.put(None)
