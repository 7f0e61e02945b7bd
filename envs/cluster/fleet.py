"""Environment workers spread over a Ray cluster's Docker nodes, seen from the driver as slots.

A slot is one environment of one worker. The driver takes free slots, calls ``reset`` and
``step`` on them and gets :class:`concurrent.futures.Future` objects back, so it can wait on
many environments at once and generate for whichever are ready.

Placement: every environment takes one unit of a custom resource (``docker`` by default) that
nodes with a Docker engine offer (``ray start --resources='{"docker": 16}'``), so workers land
only there, and a node with no Docker (the learner's GPU node) gets none. ``SPREAD`` puts the
workers on as many nodes as there are.

Losses: a worker whose process or node dies, or whose engine stops answering, is lost. The
call in flight on each of its environments fails with :class:`EpisodeLost` (the caller masks
the episode and may run it again on another slot), its slots never come back, the containers
it left are removed where the driver can reach its engine, and a replacement is started; its
slots become free once it is ready. Engines of ``REPOGYM_DOCKER_HOSTS`` (on the driver) are
handed to workers by free slots, and one that stops answering is taken out.

Task statistics (curricula): the driver holds the store (the ``stats`` file of the env
arguments, or the process's in-memory one). What the workers' envs record comes back with each
call's outcome and is merged here; each reset sends its worker what changed since the last.
"""

from __future__ import annotations

import math
import os
import socket
import threading
import uuid
import warnings
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from repogym import settings
from repogym.envs.cluster.worker import EnvWorker, Outcome, remove_worker_containers
from repogym.envs.curriculum.stats import StatsStore, store_for
from repogym.errors import DockerUnavailable, RepogymError
from repogym.sandbox import engines

LOCAL_ADDRESSES = ("auto", "local")


class EpisodeLost(RepogymError):
    """The episode's worker, node or engine was lost under it: mask it, never score it."""

    def __init__(self, where: str, reason: str, slot_reusable: bool = False) -> None:
        super().__init__(f"episode lost on {where}: {reason}")
        self.where, self.reason, self.slot_reusable = where, reason, slot_reusable


@dataclass(frozen=True)
class FleetConfig:
    """How many environments, of what, on which cluster."""

    env_id: str = "repogym/SWE-v0"
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    num_envs: int = 4
    envs_per_worker: int = 4  # environments per actor process (threads step them at once)
    address: str = "auto"  # auto: the running cluster; local: a private one here; or HOST:PORT
    resource: str = "docker"  # the custom resource a node offers per environment it can hold
    replacements: int = -1  # lost workers replaced per run; -1: as many as there are workers
    ready_timeout: float = 600.0  # seconds the first workers may take to start
    needs_docker: bool = True  # workers check their engine answers before taking episodes

    def __post_init__(self) -> None:
        if self.num_envs < 1 or self.envs_per_worker < 1:
            raise ValueError(f"num_envs={self.num_envs} and envs_per_worker="
                             f"{self.envs_per_worker} must be at least 1")
        if not self.address:
            raise ValueError("address is empty: use auto, local or HOST:PORT")


@dataclass
class _Worker:
    index: int
    id: str
    actor: Any
    n_envs: int
    engine: str | None  # assigned by the driver (REPOGYM_DOCKER_HOSTS), or None: the node's
    ready_ref: Any = None
    info: dict[str, Any] = field(default_factory=dict)
    state: str = "starting"  # starting, ready, lost

    @property
    def where(self) -> str:
        host, node = self.info.get("hostname", "?"), str(self.info.get("node_id", ""))[:6]
        return f"{host}-{node}" if node else host


def ray_module() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ValueError("running on Ray needs Ray: pip install 'repogym[ray]'") from exc
    return ray


def connect(address: str, local_resources: dict[str, float] | None = None) -> bool:
    """Joins or starts Ray; True when this call started it (and so must shut it down)."""
    ray = ray_module()
    if ray.is_initialized():
        return False
    if address == "local":
        ray.init(address="local", include_dashboard=False, resources=local_resources or {},
                 num_cpus=max(os.cpu_count() or 1, 1))
    else:
        ray.init(address=address)
    return True


class Fleet:
    """``config.num_envs`` environments in workers of ``config.envs_per_worker`` each."""

    def __init__(self, config: FleetConfig) -> None:
        stats = config.env_kwargs.get("stats")
        if stats is not None:  # one file for the driver and every worker's copy
            config = replace(config, env_kwargs={**config.env_kwargs,
                                                 "stats": str(Path(stats).resolve())})
        self.config = config
        self.task_stats: StatsStore = store_for(stats)
        # worker index -> store version it has applied; until a reset that carried changes
        # returns, every reset to that worker carries them (its envs reset in parallel)
        self._stats_acked: dict[int, int] = {}
        self.ray = ray_module()
        self.id = uuid.uuid4().hex[:8]
        self.started = connect(config.address, {config.resource: float(config.num_envs)})
        self._lock = threading.Lock()
        self._workers: list[_Worker] = []
        self._free: list[int] = []
        self._lost: list[tuple[_Worker, str, bool]] = []  # found in callbacks, handled later
        self._cleanups: list[threading.Thread] = []
        self._engines = engines.configured()  # the driver's list, if any
        self._down: set[str] = set()
        self._replacements_left = (config.replacements if config.replacements >= 0
                                   else math.ceil(config.num_envs / config.envs_per_worker))
        self.stats = {"workers_lost": 0, "workers_replaced": 0}
        self._closing = False
        try:
            self._check_resources()
            for n in self._sizes():
                self._spawn(n)
            self._wait_ready(config.ready_timeout)
        except BaseException:
            self.close()
            raise

    # --- placement -----------------------------------------------------------------------------

    def _sizes(self) -> list[int]:
        per, total = self.config.envs_per_worker, self.config.num_envs
        return [min(per, total - start) for start in range(0, total, per)]

    def _check_resources(self) -> None:
        offered = self.ray.cluster_resources().get(self.config.resource, 0)
        if offered < self.config.num_envs:
            raise ValueError(
                f"the Ray cluster offers {offered:g} '{self.config.resource}' slots for "
                f"num_envs={self.config.num_envs}: start the nodes that have Docker with "
                f"`ray start ... --resources='{{\"{self.config.resource}\": N}}'` (N episodes "
                "each), or lower num_envs")

    def _spawn(self, n_envs: int) -> _Worker:
        index = len(self._workers)
        worker_id = f"{self.id}-{index}"
        engine = self._assign_engine(n_envs)
        hosts, sources = settings.DOCKER_HOSTS, settings.IMAGE_SOURCES
        env_vars = {hosts.name: hosts.get()} if self._engines else {}
        if sources.get():
            env_vars[sources.name] = sources.get()
        remote = self.ray.remote(EnvWorker).options(
            num_cpus=0, resources={self.config.resource: n_envs}, max_concurrency=n_envs + 2,
            scheduling_strategy="SPREAD", max_restarts=0)
        actor = remote.remote(worker_id, self.config.env_id, self.config.env_kwargs, n_envs,
                              engine, env_vars, self.config.needs_docker)
        worker = _Worker(index, worker_id, actor, n_envs, engine, ready_ref=actor.info.remote())
        self._workers.append(worker)
        return worker

    def _assign_engine(self, n_envs: int) -> str | None:
        if not self._engines:
            return None
        # slots promised to workers still starting: the engine counts the running ones itself
        taken: dict[str, int] = {}
        for w in self._workers:
            if w.engine and w.state == "starting":
                url = engines.parse_engine(w.engine).url
                taken[url] = taken.get(url, 0) + w.n_envs
        return engines.pick(self._engines, exclude=self._down, taken=taken).spec

    def _wait_ready(self, timeout: float) -> None:
        refs = {w.ready_ref: w for w in self._workers if w.state == "starting"}
        done, _ = self.ray.wait(list(refs), num_returns=len(refs), timeout=timeout)
        failures = [why for ref in done if (why := self._mark_ready(refs[ref], ref, False))]
        if failures:  # a worker that cannot start here will not start anywhere else either
            raise RepogymError(f"{len(failures)} environment workers could not start: "
                               f"{failures[0]}")
        if not any(w.state == "ready" for w in self._workers):
            raise DockerUnavailable(f"no environment worker started within {timeout:.0f} s "
                                    "(see `ray status`)")

    def _mark_ready(self, worker: _Worker, ref: Any, replace: bool = True) -> str:
        """Records a started worker's slots; the reason when it failed to start instead."""
        try:
            worker.info = self.ray.get(ref)
        except self.ray.exceptions.RayError as exc:
            why = _cause(exc)
            self._retire(worker, f"did not start: {why}", False, replace)
            return why
        worker.state = "ready"
        base = worker.index * self.config.envs_per_worker
        with self._lock:
            self._free.extend(base + i for i in range(worker.n_envs))
        return ""

    # --- slots ---------------------------------------------------------------------------------

    def free(self) -> list[int]:
        """Slots that became free since the last call (new workers' included)."""
        self._handle_losses()
        starting = {w.ready_ref: w for w in self._workers if w.state == "starting"}
        if starting:
            done, _ = self.ray.wait(list(starting), num_returns=len(starting), timeout=0)
            for ref in done:
                self._mark_ready(starting[ref], ref)
        with self._lock:
            out, self._free = self._free, []
        return out

    def release(self, slot: int) -> None:
        """Gives a slot back for another episode (ignored when its worker is lost)."""
        if self._worker(slot).state == "ready":
            with self._lock:
                self._free.append(slot)

    def wait_for_slots(self, timeout: float) -> bool:
        """Blocks until a starting worker is ready; False when none became ready in time."""
        self._handle_losses()
        starting = {w.ready_ref: w for w in self._workers if w.state == "starting"}
        if not starting:
            return False
        done, _ = self.ray.wait(list(starting), num_returns=1, timeout=timeout)
        for ref in done:
            self._mark_ready(starting[ref], ref)
        return bool(done)

    def where(self, slot: int) -> str:
        return self._worker(slot).where

    def info(self, slot: int) -> dict[str, Any]:
        """The slot's worker: id, node, host, process and Docker engine."""
        worker = self._worker(slot)
        return {"worker": worker.id, "where": worker.where, **worker.info}

    def spaces(self, slot: int) -> Any:
        """A reference to the (observation, action) spaces of the slot's environment."""
        return self._worker(slot).actor.spaces.remote()

    def reset(self, slot: int, seed: int | None = None,
              options: dict[str, Any] | None = None) -> Future[tuple[Any, float]]:
        worker, i = self._worker(slot), slot % self.config.envs_per_worker
        with self._lock:
            changes = self.task_stats.changes_since(self._stats_acked.get(worker.index, 0))
        future = self._future(worker, worker.actor.reset.remote(i, seed, options, changes))
        if changes is not None:
            future.add_done_callback(lambda f: self._ack(worker, changes["version"], f))
        return future

    def _ack(self, worker: _Worker, version: int, done: Future[Any]) -> None:
        if done.exception() is None:
            with self._lock:
                self._stats_acked[worker.index] = max(version,
                                                      self._stats_acked.get(worker.index, 0))

    def step(self, slot: int, action: Any) -> Future[tuple[Any, float]]:
        worker, i = self._worker(slot), slot % self.config.envs_per_worker
        return self._future(worker, worker.actor.step.remote(i, action))

    def _worker(self, slot: int) -> _Worker:
        return self._workers[slot // self.config.envs_per_worker]

    def _future(self, worker: _Worker, ref: Any) -> Future[tuple[Any, float]]:
        """A future of ``(value, seconds)`` that fails with :class:`EpisodeLost` when the
        worker or its engine is lost."""
        out: Future[tuple[Any, float]] = Future()
        exceptions = self.ray.exceptions
        lost_errors: tuple[type[BaseException], ...] = tuple(
            getattr(exceptions, name) for name in ("RayActorError", "ActorUnavailableError",
                                                   "WorkerCrashedError", "NodeDiedError")
            if hasattr(exceptions, name))

        def settle(done: Future[Any]) -> None:
            try:
                outcome: Outcome = done.result()
                for _, results, failures in outcome.stats:  # before the caller sees the result
                    self.task_stats.merge(results, failures)
            except lost_errors as exc:
                self._note_lost(worker, f"worker lost: {_first_line(exc)}", False)
                out.set_exception(EpisodeLost(worker.where, f"worker lost: {_first_line(exc)}"))
                return
            except BaseException as exc:  # noqa: BLE001 - the caller's future carries it
                out.set_exception(exc)
                return
            if outcome.lost:
                if outcome.engine_down:
                    self._note_lost(worker, outcome.lost, True)
                out.set_exception(EpisodeLost(worker.where, outcome.lost,
                                              slot_reusable=not outcome.engine_down))
                return
            out.set_result((outcome.value, outcome.seconds))

        ref.future().add_done_callback(settle)
        return out

    # --- losses --------------------------------------------------------------------------------

    def _note_lost(self, worker: _Worker, reason: str, engine_down: bool) -> None:
        """Called from Ray's callback threads: only bookkeeping here, the rest in
        :meth:`_handle_losses` on the driver's thread."""
        with self._lock:
            if worker.state == "lost":
                return
            worker.state = "lost"
            self._lost.append((worker, reason, engine_down))
            first = worker.index * self.config.envs_per_worker
            mine = range(first, first + worker.n_envs)
            self._free = [s for s in self._free if s not in mine]

    def _handle_losses(self) -> None:
        with self._lock:
            lost, self._lost = self._lost, []
        for worker, reason, engine_down in lost:
            self._retire(worker, reason, engine_down)

    def _retire(self, worker: _Worker, reason: str, engine_down: bool,
                replace: bool = True) -> None:
        worker.state = "lost"
        self.stats["workers_lost"] += 1
        warnings.warn(f"environment worker {worker.id} on {worker.where} lost: {reason}",
                      stacklevel=2)
        if engine_down and worker.engine:
            url = engines.parse_engine(worker.engine).url
            self._down.add(url)
            engines.take_out(url)
        self.ray.kill(worker.actor, no_restart=True)
        self._clean_up_after(worker)
        if replace and self._replacements_left > 0 and not self._closing:
            self._replacements_left -= 1
            self.stats["workers_replaced"] += 1
            try:
                self._spawn(worker.n_envs)  # new slots, free once it is ready
            except DockerUnavailable as exc:  # every listed engine is out
                warnings.warn(f"no replacement for {worker.id}: {exc}", stacklevel=2)

    def _clean_up_after(self, worker: _Worker) -> None:
        """Removes the lost worker's containers from its engine, when this machine reaches it
        (a network engine, or a socket on this same host). A lost machine took its containers
        with it; a live one removes them with ``repogym doctor --cleanup``."""
        spec = str(worker.info.get("engine") or worker.engine or "")
        same_host = worker.info.get("hostname") == socket.gethostname()
        if not spec or (spec.startswith("unix://") and not same_host):
            return

        def remove() -> None:
            try:
                remove_worker_containers(spec, worker.id)
            except (RepogymError, ValueError) as exc:
                warnings.warn(f"could not remove what {worker.id} left on {spec}: {exc}; run "
                              "`repogym doctor --cleanup` there", stacklevel=1)

        thread = threading.Thread(target=remove, name=f"clean-{worker.id}", daemon=True)
        thread.start()
        self._cleanups.append(thread)

    # --- the end -------------------------------------------------------------------------------

    def workers(self) -> list[dict[str, Any]]:
        return [{"id": w.id, "state": w.state, "where": w.where, **w.info} for w in self._workers]

    def close(self) -> None:
        """Closes every live worker's environments, removes what lost ones left, stops Ray
        when this fleet started it. Safe to call twice."""
        ray = self.ray
        self._closing = True
        self._handle_losses()
        # a worker still starting has started no container (environments start them on reset)
        live = [w for w in self._workers if w.state == "ready"]
        closing = {w.actor.close.remote(): w for w in live}
        if closing:
            ray.wait(list(closing), num_returns=len(closing), timeout=120)
        for w in self._workers:
            ray.kill(w.actor, no_restart=True)
        for w in self._workers:
            if w.state == "lost":
                self._clean_up_after(w)  # again: a container may have been mid-start before
        for thread in self._cleanups:
            thread.join(timeout=120)
        self._workers, self._free, self._cleanups = [], [], []
        if self.started and ray.is_initialized():
            ray.shutdown()
            self.started = False


def _cause(exc: BaseException) -> str:
    """The last line of a Ray error's traceback: the exception raised in the worker."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return (lines[-1] if lines else type(exc).__name__)[:300]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:300]
