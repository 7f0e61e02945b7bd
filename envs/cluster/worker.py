"""One environment worker: a Ray actor holding a few environments of one Docker node.

The driver (the learner, or a vector env) calls ``reset(i, ...)`` and ``step(i, ...)`` for its
environment ``i``; the actor runs calls of different environments at once (a threaded actor),
each in its own thread. A failure of the infrastructure under an episode (its engine stops
answering, its container vanishes) comes back as an :class:`Outcome` with ``lost`` set instead
of an exception, so the driver can mask the episode and run it elsewhere; anything else raises
as usual. Every container the worker starts carries its worker id as a label, so whoever
outlives the worker can remove what it left (:func:`remove_worker_containers`).

This module does not import Ray: the driver wraps :class:`EnvWorker` with ``ray.remote``.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from repogym.envs.curriculum import sharing
from repogym.errors import ActionError, DockerUnavailable, RepogymError, TaskError
from repogym.sandbox import engines, owners
from repogym.sandbox.base import LABEL_MANAGED, LABEL_PREFIX, SandboxLost
from repogym.sandbox.client import current_engine, docker_client, use_engine

LABEL_WORKER = f"{LABEL_PREFIX}.worker"
DEFAULT_ENGINE = "unix:///var/run/docker.sock"


@dataclass(frozen=True)
class Outcome:
    """What one call returned (``value``), how long it took, or why its episode was lost."""

    value: Any = None
    seconds: float = 0.0
    lost: str = ""  # why the episode was lost ("" when it was not)
    engine_down: bool = False  # the worker's engine stopped answering: retire the worker
    stats: Any = ()  # task statistics recorded meanwhile, for the driver's store (sharing.py)


class EnvWorker:
    """``n_envs`` environments made with ``gym.make(env_id, **env_kwargs)`` on this node.

    ``engine`` (a spec such as ``ssh://box?slots=16``) pins the worker's containers to that
    engine; without it the node's own engine is used (``REPOGYM_DOCKER_HOSTS`` or
    ``DOCKER_HOST`` there, else the local socket). ``env_vars`` are set first (image sources,
    the engine list).
    """

    def __init__(self, worker_id: str, env_id: str, env_kwargs: dict[str, Any], n_envs: int,
                 engine: str | None = None, env_vars: dict[str, str] | None = None,
                 needs_docker: bool = True) -> None:
        os.environ.update(env_vars or {})
        owners.PROCESS_LABELS[LABEL_WORKER] = worker_id
        sharing.relay()  # task statistics live in the driver; the envs here keep a copy
        if engine:
            use_engine(engines.parse_engine(engine))
        if needs_docker:
            docker_client()  # a worker whose engine does not answer fails to start
        self.worker_id = worker_id
        self.envs = [gym.make(env_id, **env_kwargs) for _ in range(n_envs)]

    def info(self) -> dict[str, Any]:
        """Where the worker runs: its node, host, process and Docker engine."""
        node = ""
        try:
            import ray

            node = ray.get_runtime_context().get_node_id()
        except Exception:  # noqa: BLE001 - outside Ray (tests) there is no node id
            pass
        return {"worker": self.worker_id, "node_id": node, "hostname": socket.gethostname(),
                "pid": os.getpid(), "engine": self.engine_spec()}

    def engine_spec(self) -> str:
        try:
            engine = current_engine()
        except DockerUnavailable:
            return ""
        if engine is not None:
            return engine.spec
        return os.environ.get("DOCKER_HOST") or DEFAULT_ENGINE

    def spaces(self) -> tuple[Any, Any]:
        """The single environment's observation and action spaces."""
        return self.envs[0].observation_space, self.envs[0].action_space

    def reset(self, i: int, seed: int | None = None, options: dict[str, Any] | None = None,
              stats: dict[str, Any] | None = None) -> Outcome:
        """``stats``: what changed in the driver's task statistics since the last reset."""
        if stats:
            sharing.update(stats)
        return self._call(self.envs[i].reset, seed=seed, options=options)

    def step(self, i: int, action: Any) -> Outcome:
        return self._call(self.envs[i].step, action)

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Outcome:
        start = time.perf_counter()
        try:
            value = fn(*args, **kwargs)
        except DockerUnavailable as exc:
            return Outcome(lost=f"engine down: {exc}"[:500], engine_down=True,
                           seconds=time.perf_counter() - start, stats=sharing.drain())
        except (TaskError, ActionError):
            raise  # the task or the caller is wrong: running it elsewhere changes nothing
        except (SandboxLost, RepogymError) as exc:  # infrastructure under the episode
            return Outcome(lost=f"{type(exc).__name__}: {exc}"[:500],
                           seconds=time.perf_counter() - start, stats=sharing.drain())
        return Outcome(value, time.perf_counter() - start, stats=sharing.drain())

    def close(self) -> None:
        """Closes every environment (their containers go); safe to call twice."""
        for env in self.envs:
            try:
                env.close()
            except RepogymError:
                continue  # the engine is gone: its containers stay listed for removal at exit
        owners.close_all()


def remove_worker_containers(engine_spec: str, worker_id: str) -> list[str]:
    """Removes every container a (lost) worker left on its engine; names those removed.

    Raises :class:`~repogym.errors.DockerUnavailable` when the engine does not answer here.
    """
    spec = engine_spec or DEFAULT_ENGINE
    client = engines.make_client(engines.parse_engine(spec), timeout=30)
    rows = client.api.containers(all=True, filters={
        "label": [f"{LABEL_MANAGED}=1", f"{LABEL_WORKER}={worker_id}"]})
    refs = [owners.ContainerRef(r["Id"], (r.get("Names") or ["?"])[0].lstrip("/"),
                                r.get("Labels") or {}) for r in rows]
    return owners.remove_containers(refs, client)
