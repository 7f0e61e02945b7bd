"""Where an env with the default pool settings gets its containers and its grader.

In a plain process: the process's shared pool (:mod:`repogym.sandbox.shared`), served
to child processes as well (:mod:`repogym.sandbox.broker`). In a worker of an async
vector env whose parent serves pools: the parent's pool, leased over its socket.
"""

from __future__ import annotations

import os
import threading
import warnings
from multiprocessing import AuthenticationError
from typing import Any, TypeAlias

from repogym.envs.grading.grader import Grader, GraderConfig
from repogym.sandbox import broker, shared
from repogym.sandbox.base import default_run_id
from repogym.sandbox.pool import SandboxPool

Pool: TypeAlias = SandboxPool | broker.RemotePool

_lock = threading.Lock()
_broker: broker.Broker | None = None


def run_id() -> str:
    """The run id of an env that names none: its parent's in a vector env worker that leases
    from the parent, so that the two share their pool; else the process's."""
    address = broker.parent_address()
    return address[1] if address else default_run_id()


def open_pool(key: shared.PoolKey) -> Pool:
    """The pool for an env with the default settings; pair it with :func:`close_pool`."""
    address = broker.parent_address()
    if address is not None:
        try:
            return broker.RemotePool(address, key)
        except (OSError, EOFError, AuthenticationError) as exc:
            warnings.warn(f"the parent process does not serve its pool ({exc}); this worker "
                          "keeps containers of its own", stacklevel=3)
    serve()
    return shared.open_pool(key)


def close_pool(pool: Pool) -> None:
    if isinstance(pool, broker.RemotePool):
        pool.close()
    else:
        shared.close_pool(pool)


def grader_for(pool: Pool | None, config: GraderConfig | None) -> Any:
    """The env's grader: the parent's for a leased pool, else one over ``pool``."""
    if isinstance(pool, broker.RemotePool):
        return broker.RemoteGrader(pool)
    return Grader(config, pool=pool)


def serve() -> None:
    """Serves this process's shared pools (and :data:`broker.SERVICES`) to its child
    processes (once per process)."""
    global _broker
    with _lock:
        if _broker is None or _broker.pid != os.getpid():
            _broker = broker.Broker(shared.open_pool, shared.close_pool, grader_for)
        else:
            _broker.export()  # again: the variable may have been changed since
