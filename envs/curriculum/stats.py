"""Per-task statistics: how each task has gone so far, kept per process and per file.

Every env of a process that names the same ``stats`` file (or none) shares one
:class:`StatsStore`; an async vector env's workers reach their parent's store and Ray workers
their driver's (:mod:`repogym.envs.curriculum.sharing`). The store holds, per task:
episodes graded and resolved, the reward's mean and variance, turns, when it was last seen,
its most recent outcomes, and the snapshots of its recent failed episodes (failure starts).
With a file, the store is written after every change (a whole JSON file, replaced
atomically) and read back when the next process opens it: a resumed run keeps its curriculum.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

FORMAT = 1  # the file's format version
RECENT = 32  # outcomes kept per task, newest last
FAILURES = 4  # failure snapshots kept per task, newest last (older ones are deleted)


@dataclass(frozen=True)
class EpisodeResult:
    """How one episode of a task ended: graded (submitted) or cut by a budget (not graded)."""

    task_id: str
    graded: bool
    resolved: bool = False
    reward: float = 0.0
    turns: int = 0
    time: float = 0.0  # time.time() when it ended


@dataclass
class TaskStats:
    """One task's record. Rates count ended episodes; reward moments count graded ones."""

    attempts: int = 0  # graded episodes
    successes: int = 0  # graded episodes that resolved the task
    cut: int = 0  # episodes truncated by a budget before any grading
    reward_mean: float = 0.0
    reward_m2: float = 0.0  # sum of squared deviations (Welford), for the variance
    turns_mean: float = 0.0  # steps per ended episode
    last_seen: float = 0.0  # time.time() of the last ended episode
    last_episode: int = 0  # the store's count of ended episodes when this one ended
    recent: list[int] = field(default_factory=list)  # 1 resolved, 0 not; newest last

    @property
    def ended(self) -> int:
        return self.attempts + self.cut

    @property
    def success_rate(self) -> float | None:
        """Resolved among graded episodes; None before the first."""
        return self.successes / self.attempts if self.attempts else None

    @property
    def reward_var(self) -> float | None:
        return self.reward_m2 / (self.attempts - 1) if self.attempts > 1 else None

    def recent_rate(self, window: int) -> float | None:
        """Resolved among the last ``window`` ended episodes (a cut one counts as unresolved)."""
        last = self.recent[-window:]
        return sum(last) / len(last) if last else None

    def add(self, result: EpisodeResult, episode: int) -> None:
        n = self.ended + 1
        self.turns_mean += (result.turns - self.turns_mean) / n
        if result.graded:
            self.attempts += 1
            self.successes += int(result.resolved)
            delta = result.reward - self.reward_mean
            self.reward_mean += delta / self.attempts
            self.reward_m2 += delta * (result.reward - self.reward_mean)
        else:
            self.cut += 1
        self.recent = [*self.recent, int(result.graded and result.resolved)][-RECENT:]
        self.last_seen, self.last_episode = result.time or time.time(), episode

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["success_rate"] = self.success_rate  # for readers of the file; ignored on load
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskStats:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass(frozen=True)
class StatsTable:
    """What a sampler sees: every task's stats (a copy) and the episodes ended so far."""

    tasks: dict[str, TaskStats]
    episodes: int

    def get(self, task_id: str) -> TaskStats:
        return self.tasks.get(task_id) or TaskStats()


class StatsStore:
    """The statistics of one file (or of none: in memory) in this process; thread-safe."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path).resolve() if path is not None else None
        self._lock = threading.Lock()
        self._tasks: dict[str, TaskStats] = {}
        self._failures: dict[str, list[dict[str, Any]]] = {}
        self._changed: dict[str, int] = {}  # task id -> version of its last change
        self.episodes = 0
        self.version = 0
        self._applied = 0  # the newest other store's version taken (apply)
        if self.path is not None and self.path.exists():
            self._load(self.path)

    # --- reading -------------------------------------------------------------------------------

    def table(self) -> StatsTable:
        with self._lock:
            return StatsTable({k: TaskStats.from_dict(asdict(v)) for k, v in self._tasks.items()},
                              self.episodes)

    def failures(self, task_id: str) -> list[dict[str, Any]]:
        """The failure snapshots kept for ``task_id`` (entries of :func:`failures.bank`)."""
        with self._lock:
            return [dict(e) for e in self._failures.get(task_id, [])]

    def with_failures(self) -> set[str]:
        with self._lock:
            return {k for k, v in self._failures.items() if v}

    def failure_dir(self) -> str:
        """Where failure snapshots go: beside the file, or this process's snapshot folder."""
        if self.path is not None:
            return str(self.path.with_name(self.path.name + ".failures"))
        from repogym.envs import fork  # here: fork imports the Docker sandbox, slow to load

        return str(fork.default_dir() / "failures")

    # --- writing -------------------------------------------------------------------------------

    def record(self, result: EpisodeResult) -> None:
        self.merge([result])

    def merge(self, results: Iterable[EpisodeResult], failures: Iterable[
            tuple[str, dict[str, Any]]] = ()) -> None:
        """Adds ended episodes and failure snapshots (from this process or a worker's)."""
        with self._lock:
            for result in results:
                self.episodes += 1
                self.version += 1
                self._tasks.setdefault(result.task_id, TaskStats()).add(result, self.episodes)
                self._changed[result.task_id] = self.version
            for task_id, entry in failures:
                self._add_failure(task_id, entry)
            self._save()

    def add_failure(self, task_id: str, entry: dict[str, Any]) -> None:
        self.merge([], [(task_id, entry)])

    def drop_failure(self, task_id: str, snapshot_id: str) -> None:
        """Forgets a failure snapshot that cannot be used any more (its files are gone)."""
        with self._lock:
            kept = [e for e in self._failures.get(task_id, [])
                    if e["snapshot"]["id"] != snapshot_id]
            self._failures[task_id] = kept
            self.version += 1
            self._changed[task_id] = self.version
            self._save()

    def _add_failure(self, task_id: str, entry: dict[str, Any]) -> None:
        kept = [*self._failures.get(task_id, []), entry]
        for old in kept[:-FAILURES]:
            shutil.rmtree(old["snapshot"]["folder"], ignore_errors=True)
        self._failures[task_id] = kept[-FAILURES:]
        self.version += 1
        self._changed[task_id] = self.version

    # --- what changed, for Ray workers ---------------------------------------------------------

    def changes_since(self, version: int) -> dict[str, Any] | None:
        """The tasks changed after ``version`` (None when nothing did), to bring a copy
        elsewhere up to date (:meth:`apply`)."""
        with self._lock:
            if version >= self.version:
                return None
            ids = [k for k, v in self._changed.items() if v > version]
            return {"version": self.version, "episodes": self.episodes,
                    "tasks": {k: asdict(self._tasks[k]) for k in ids if k in self._tasks},
                    "failures": {k: list(self._failures.get(k, [])) for k in ids}}

    def apply(self, changes: dict[str, Any]) -> None:
        """Takes another store's :meth:`changes_since` as they are (never saved here); changes
        older than some already taken are left out (they crossed on the way)."""
        with self._lock:
            if int(changes["version"]) <= self._applied:
                return
            self._applied = int(changes["version"])
            self.episodes = max(self.episodes, int(changes["episodes"]))
            self.version = max(self.version, int(changes["version"]))
            for k, v in changes["tasks"].items():
                self._tasks[k] = TaskStats.from_dict(v)
            for k, v in changes["failures"].items():
                self._failures[k] = list(v)

    # --- the file ------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "episodes": self.episodes,
                "tasks": {k: v.to_dict() for k, v in sorted(self._tasks.items())},
                "failures": {k: v for k, v in sorted(self._failures.items()) if v}}

    def _save(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=self.path.name + ".", dir=self.path.parent)
        with os.fdopen(fd, "w") as f:
            json.dump(self.to_dict(), f, indent=1)
        os.replace(tmp, self.path)

    def _load(self, path: Path) -> None:
        try:
            data = json.loads(path.read_text())
            if data.get("format") != FORMAT:
                raise ValueError(f"format {data.get('format')!r}, this repogym reads {FORMAT}")
            self.episodes = int(data["episodes"])
            self._tasks = {k: TaskStats.from_dict(v) for k, v in data["tasks"].items()}
            self._failures = {k: list(v) for k, v in data.get("failures", {}).items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"stats={path} is not a task statistics file ({exc}): give the "
                             "file a run wrote, or a new path") from exc
        self.version = 1
        self._changed = dict.fromkeys([*self._tasks, *self._failures], 1)


# --- the stores of this process ------------------------------------------------------------------

_lock = threading.Lock()
_stores: dict[str | None, StatsStore] = {}


def _forget_after_fork() -> None:
    """A forked child (an async vector env's worker) starts with no store of its own: it
    reaches its parent's (sharing.py), whose file it must not write too."""
    global _lock
    _lock = threading.Lock()
    _stores.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


def store_for(path: str | Path | None) -> StatsStore:
    """This process's store for ``path`` (None: the in-memory one), made (or read) once."""
    key = str(Path(path).resolve()) if path is not None else None
    with _lock:
        if key not in _stores:
            _stores[key] = StatsStore(key)
        return _stores[key]
