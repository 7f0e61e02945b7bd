"""One statistics store for every env of a run, whichever process runs it.

- Envs of one process share :func:`~repogym.envs.curriculum.stats.store_for` the same file.
- An async vector env's workers use their parent's store over the socket the parent already
  serves its container pool on (:mod:`repogym.sandbox.broker`): every graded episode is
  recorded there, and every draw reads the parent's statistics.
- Ray workers (:mod:`repogym.envs.cluster`) keep a copy: what their envs record goes back to
  the driver with each call's outcome, the driver merges it into its store, and each reset
  it sends brings the worker's copy up to date with what changed since its last one.

Only the process that owns a store writes its file.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Callable
from multiprocessing import AuthenticationError
from pathlib import Path
from typing import Any

from repogym.envs.curriculum.stats import EpisodeResult, StatsStore, StatsTable, store_for
from repogym.sandbox import broker

SERVICE = "curriculum"


def _key(path: str | Path | None) -> str | None:
    return str(Path(path).resolve()) if path is not None else None


# --- the parent's side -------------------------------------------------------------------------

def _serve(op: str, path: str | None, *args: Any) -> Any:
    store = store_for(path)
    if op == "table":
        return store.table()
    if op == "merge":
        return store.merge(*args)
    if op == "failures":
        return store.failures(*args)
    if op == "with_failures":
        return store.with_failures()
    if op == "drop_failure":
        return store.drop_failure(*args)
    if op == "failure_dir":
        return store.failure_dir()
    raise ValueError(f"unknown curriculum request {op!r}")


broker.SERVICES[SERVICE] = _serve


# --- an async vector env worker's side ---------------------------------------------------------

_client_lock = threading.Lock()
_client: tuple[int, broker.ServiceClient] | None = None


def _parent() -> broker.ServiceClient | None:
    """This worker's connection to its parent (one per process), or None outside a worker."""
    global _client
    address = broker.parent_address()
    if address is None:
        return None
    with _client_lock:
        if _client is None or _client[0] != os.getpid():
            try:
                _client = (os.getpid(), broker.ServiceClient(address))
            except (OSError, EOFError, AuthenticationError) as exc:
                warnings.warn(f"the parent process does not serve task statistics ({exc}); "
                              "this worker keeps its own", stacklevel=3)
                return None
        return _client[1]


class RemoteStore:
    """The parent's store for ``path``, as a worker's env uses it."""

    def __init__(self, client: broker.ServiceClient, path: str | None) -> None:
        self.client, self.path = client, path

    def _call(self, op: str, *args: Any) -> Any:
        return self.client.call(SERVICE, op, self.path, *args)

    def table(self) -> StatsTable:
        table: StatsTable = self._call("table")
        return table

    def record(self, result: EpisodeResult) -> None:
        self._call("merge", [result], [])

    def add_failure(self, task_id: str, entry: dict[str, Any]) -> None:
        self._call("merge", [], [(task_id, entry)])

    def failures(self, task_id: str) -> list[dict[str, Any]]:
        return list(self._call("failures", task_id))

    def with_failures(self) -> set[str]:
        return set(self._call("with_failures"))

    def drop_failure(self, task_id: str, snapshot_id: str) -> None:
        self._call("drop_failure", task_id, snapshot_id)

    def failure_dir(self) -> str:
        return str(self._call("failure_dir"))


# --- a Ray worker's side -------------------------------------------------------------------------

class RelayStore(StatsStore):
    """A copy of the driver's store: reads are local, what is recorded waits to be sent."""

    def __init__(self) -> None:
        super().__init__(None)
        self._pending: list[EpisodeResult] = []
        self._pending_failures: list[tuple[str, dict[str, Any]]] = []

    def merge(self, results: Any, failures: Any = ()) -> None:
        results, failures = list(results), list(failures)
        with self._lock:
            self._pending += results
            self._pending_failures += failures
        super().merge([], failures)  # usable here at once; the driver's copy follows

    def drain(self) -> tuple[list[EpisodeResult], list[tuple[str, dict[str, Any]]]]:
        with self._lock:
            out = (self._pending, self._pending_failures)
            self._pending, self._pending_failures = [], []
        return out


_relaying = False
_relays: dict[str | None, RelayStore] = {}


def relay() -> None:
    """Makes this process's envs keep copies of their driver's stores (a Ray worker)."""
    global _relaying
    _relaying = True


def drain() -> list[tuple[str | None, list[EpisodeResult], list[tuple[str, dict[str, Any]]]]]:
    """What this worker's envs recorded since the last call, per store, for the driver."""
    out = []
    with _client_lock:
        relays = list(_relays.items())
    for key, store in relays:
        results, failures = store.drain()
        if results or failures:
            out.append((key, results, failures))
    return out


def update(changes: dict[str, Any]) -> None:
    """Brings this worker's copies up to date with the driver's store (its
    :meth:`~repogym.envs.curriculum.stats.StatsStore.changes_since`): a Ray vector env's
    workers all make their envs with one set of arguments, so one store."""
    with _client_lock:
        relays = list(_relays.values()) or [_relays.setdefault(None, RelayStore())]
    for store in relays:
        store.apply(changes)


def _relay_for(key: str | None) -> RelayStore:
    with _client_lock:
        if key not in _relays:
            _relays[key] = RelayStore()
        return _relays[key]


# --- what an env opens -------------------------------------------------------------------------

def open_store(path: str | Path | None, serve: Callable[[], None]) -> Any:
    """The store an env records to and draws from: its process's, its parent's (a worker of
    an async vector env), or its driver's copy (a Ray worker). ``serve`` starts serving this
    process's :data:`broker.SERVICES` to its children (``pooling.serve``)."""
    key = _key(path)
    if _relaying:
        return _relay_for(key)
    client = _parent()
    if client is not None:
        return RemoteStore(client, key)
    serve()  # this process's workers, if it gets any, reach the store through it
    return store_for(key)
