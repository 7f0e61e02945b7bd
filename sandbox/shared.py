"""The pools that envs with the default settings share, one per process and settings.

Every env made with ``pool_size=None`` (the default) in one process uses the same
:class:`~repogym.sandbox.pool.SandboxPool`: it keeps :data:`SPARES` started container(s)
ready per image in use and resets used ones in place. Envs stepped together in one process (a
sync vector env, the trainer's threads) then hold one container each plus one spare per image,
instead of a spare each. The pool is closed, and its containers removed, when the last env
that opened it closes.

Envs whose settings differ (run id, output limit, reuse, grading) get pools of their own: a
container started for one configuration is never handed to another.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

from repogym.sandbox.pool import SandboxPool

SPARES = 1  # agent containers kept ready per image, beyond the ones in use
GRADERS = 1  # warm grading containers per image, when warm grading is on


@dataclass(frozen=True)
class PoolKey:
    """What must agree for two envs to share containers."""

    run_id: str
    output_limit: int
    reuse: bool = True
    warm_grader: bool = True
    grader: Any = None  # the GraderConfig (frozen, hashable): its containers' limits
    engine: str | None = None  # the engine's URL (None: the default one)


@dataclass
class _Entry:
    pool: SandboxPool
    users: int = 0


_lock = threading.Lock()
_pools: dict[PoolKey, _Entry] = {}


def _forget_after_fork() -> None:
    """A forked child starts with no pools: its parent's containers are not its own."""
    global _lock
    _lock = threading.Lock()
    _pools.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


def open_pool(key: PoolKey) -> SandboxPool:
    """The process's pool for ``key``, made on first use; pair every call with
    :func:`close_pool`."""
    with _lock:
        entry = _pools.get(key)
        if entry is None or entry.pool.closed:
            pool = SandboxPool(size=SPARES, reuse=key.reuse,
                               grader_size=GRADERS if key.warm_grader else 0, run_id=key.run_id)
            entry = _pools[key] = _Entry(pool)
        entry.users += 1
        return entry.pool


def close_pool(pool: SandboxPool) -> None:
    """One user fewer; the last one closes the pool (removing its containers)."""
    with _lock:
        for key, entry in list(_pools.items()):
            if entry.pool is pool:
                entry.users -= 1
                if entry.users > 0:
                    return
                del _pools[key]
                break
    pool.close()


def users(pool: SandboxPool) -> int:
    """How many envs (and remote clients) hold ``pool`` open now."""
    with _lock:
        return next((e.users for e in _pools.values() if e.pool is pool), 0)


def pool_of(run_id: str) -> SandboxPool | None:
    """This process's shared pool for ``run_id`` (the first, if settings differ)."""
    with _lock:
        return next((e.pool for k, e in _pools.items() if k.run_id == run_id), None)
