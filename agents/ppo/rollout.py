"""Multi-turn rollouts: several environments at once, token ids kept exactly as sampled.

Environments run in a thread pool (their work is containers and I/O), or on a Ray cluster's
workers (:class:`~repogym.envs.cluster.fleet.Fleet`), and the policy generates for whichever
episodes are waiting while the others are still stepping, so container time overlaps
generation. Each episode is one token sequence: prompt and observations with loss mask 0, the
policy's sampled ids with loss mask 1, and each step's reward on the last policy token of that
turn.

An episode whose worker, node or engine is lost under it (:class:`EpisodeLost`) is masked: it
never reaches the batch, so it is never scored as a 0. It runs again on another slot up to
``retries`` times; the update goes on with the episodes that finished, and ``Rollout.lost``
lists every lost attempt.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym

from repogym.agents.ppo.chat import ChatFormat
from repogym.agents.ppo.generation import Generator
from repogym.envs.cluster.fleet import EpisodeLost

SLOT_WAIT = 300.0  # seconds to wait for a replacement worker when no environment is left


@dataclass(frozen=True)
class Limits:
    """Caps that cut an episode short (a cut episode is never scored as a real 0)."""

    max_turns: int
    max_new_tokens: int
    max_context: int


@dataclass(frozen=True)
class EpisodeJob:
    """One episode to run: episodes of a group share the reset seed, hence the task."""

    index: int
    seed: int
    group: int
    fork: Any = None  # a shared prefix to start from (see fork.py): its snapshot and tokens
    options: dict[str, Any] | None = None  # reset options: the group's draw of the curriculum


@dataclass
class Turn:
    action: str
    tokens: int
    observation: str = ""
    reward: float = 0.0
    env_seconds: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class Trajectory:
    job: EpisodeJob
    env: int = -1  # which worker environment ran it
    where: str = "local"  # the node it ran on
    task_id: str = ""
    tokens: list[int] = field(default_factory=list)
    policy_mask: list[int] = field(default_factory=list)  # 1 where the policy sampled the id
    rewards: list[float] = field(default_factory=list)  # per id, on the last id of each turn
    turns: list[Turn] = field(default_factory=list)
    terminated: bool = False
    cut: str = ""  # why the episode stopped early: env_truncated, max_turns or max_context
    final_info: dict[str, Any] = field(default_factory=dict)
    env_record: str = ""  # the environment's own record of this episode (info["record"])
    fork: dict[str, Any] = field(default_factory=dict)  # the prefix it started from, if any

    @property
    def reward(self) -> float:
        return float(sum(self.rewards))

    @property
    def resolved(self) -> bool:
        components = self.final_info.get("reward_components") or {}
        return bool(components.get("resolved", False))

    def append(self, ids: list[int], policy: bool) -> None:
        self.tokens += ids
        self.policy_mask += [int(policy)] * len(ids)
        self.rewards += [0.0] * len(ids)


@dataclass(frozen=True)
class LostEpisode:
    """One attempt of a job lost with its worker, node or engine (masked, never scored)."""

    job: EpisodeJob
    where: str
    reason: str
    retried: bool  # the job went back in the queue


@dataclass
class Rollout:
    trajectories: list[Trajectory]
    env_seconds: float = 0.0  # summed over workers: time spent inside reset/step
    generation_seconds: float = 0.0  # wall time spent generating
    env_wait_seconds: float = 0.0  # wall time the learner waited with nothing to generate
    wall_seconds: float = 0.0
    generated_tokens: int = 0
    lost: list[LostEpisode] = field(default_factory=list)


@runtime_checkable
class EnvSlots(Protocol):
    """Environments addressed by slot number, each call answered by a future of
    ``(result, seconds)`` that fails with :class:`EpisodeLost` when the episode is lost."""

    def free(self) -> list[int]:
        """Slots free for a new episode since the last call (new ones included)."""
        ...

    def release(self, slot: int) -> None: ...

    def reset(self, slot: int, seed: int | None = None,
              options: dict[str, Any] | None = None) -> Future[tuple[Any, float]]: ...

    def step(self, slot: int, action: Any) -> Future[tuple[Any, float]]: ...

    def where(self, slot: int) -> str: ...

    def wait_for_slots(self, timeout: float) -> bool:
        """Blocks until new slots may be free; False when none can come."""
        ...


class LocalSlots:
    """Environments of this process, stepped in a thread pool."""

    def __init__(self, envs: Sequence[gym.Env[Any, Any]], pool: Executor) -> None:
        self.envs, self.pool = envs, pool
        self._free = list(range(len(envs)))

    def free(self) -> list[int]:
        out, self._free = self._free, []
        return out

    def release(self, slot: int) -> None:
        self._free.append(slot)

    def reset(self, slot: int, seed: int | None = None,
              options: dict[str, Any] | None = None) -> Future[tuple[Any, float]]:
        return self.pool.submit(_timed, self.envs[slot].reset, seed=seed, options=options)

    def step(self, slot: int, action: Any) -> Future[tuple[Any, float]]:
        return self.pool.submit(_timed, self.envs[slot].step, action)

    def where(self, slot: int) -> str:
        return "local"

    def wait_for_slots(self, timeout: float) -> bool:
        return False  # local environments are never lost: no slot comes back on its own


@dataclass
class _Episode:
    env: int
    traj: Trajectory
    attempt: int = 0


def collect_rollouts(envs: Sequence[gym.Env[Any, Any]] | EnvSlots, generator: Generator,
                     chat: ChatFormat, jobs: Sequence[EpisodeJob], limits: Limits,
                     pool: Executor | None = None,
                     at_end: Callable[[gym.Env[Any, Any], Trajectory], None] | None = None,
                     retries: int = 1) -> Rollout:
    """Runs every job to its end on the given environments and returns them in job order.

    ``envs`` is a list of environments (stepped in ``pool``) or :class:`EnvSlots`. A lost
    episode runs again up to ``retries`` times; one that is still lost is left out.
    ``at_end`` (local environments only) sees each episode's env and trajectory as it ends,
    before the env runs another.
    """
    local: Sequence[gym.Env[Any, Any]] = ()
    if isinstance(envs, EnvSlots):
        assert at_end is None, "at_end needs the environments in this process"
        slots: EnvSlots = envs
    else:
        assert pool is not None, "local environments need a pool to step them in"
        slots, local = LocalSlots(envs, pool), envs
    rollout = Rollout([])
    queue: deque[tuple[EpisodeJob, int]] = deque((job, 0) for job in jobs)
    pending: dict[Future[Any], _Episode] = {}
    waiting: list[_Episode] = []
    start = time.perf_counter()
    while queue or pending or waiting:
        free = slots.free()
        while free and queue:
            job, attempt = queue.popleft()
            env = free.pop()
            ep = _Episode(env, Trajectory(job, env=env, where=slots.where(env)), attempt)
            options = {"snapshot": job.fork.snapshot} if job.fork is not None else job.options
            pending[slots.reset(env, seed=job.seed, options=options)] = ep
        for env in free:  # kept by the slots, which drop those of a worker lost meanwhile
            slots.release(env)
        if not pending and not waiting:  # jobs left, no environment to run them on
            if not slots.wait_for_slots(SLOT_WAIT):
                rollout.lost += [LostEpisode(job, "", "no environment left", False)
                                 for job, _ in queue]
                queue.clear()
            continue
        if not waiting:
            t0 = time.perf_counter()
            wait(list(pending), return_when=FIRST_COMPLETED)
            rollout.env_wait_seconds += time.perf_counter() - t0
        for fut in [f for f in pending if f.done()]:
            ep = pending.pop(fut)
            try:
                result, seconds = fut.result()  # any other infrastructure failure raises here
            except EpisodeLost as lost:
                _on_lost(ep, lost, queue, retries, rollout)
                if lost.slot_reusable:
                    slots.release(ep.env)
                continue
            rollout.env_seconds += seconds
            alive = _on_reset(ep, result, chat, limits) if not ep.traj.turns else \
                _on_step(ep, result, seconds, chat, limits)
            if alive:
                waiting.append(ep)
            else:
                if at_end is not None:
                    at_end(local[ep.env], ep.traj)
                rollout.trajectories.append(ep.traj)
                slots.release(ep.env)
        if waiting:
            t0 = time.perf_counter()
            _act(waiting, generator, chat, limits, slots, pending, rollout)
            rollout.generation_seconds += time.perf_counter() - t0
            waiting = []
    rollout.wall_seconds = time.perf_counter() - start
    rollout.trajectories.sort(key=lambda t: t.job.index)
    return rollout


def _on_lost(ep: _Episode, lost: EpisodeLost, queue: deque[tuple[EpisodeJob, int]],
             retries: int, rollout: Rollout) -> None:
    """Masks the attempt; the job goes to the front of the queue while it has retries."""
    retry = ep.attempt < retries
    rollout.lost.append(LostEpisode(ep.traj.job, ep.traj.where, lost.reason, retry))
    if retry:
        queue.appendleft((ep.traj.job, ep.attempt + 1))


def _act(waiting: list[_Episode], generator: Generator, chat: ChatFormat, limits: Limits,
         slots: EnvSlots, pending: dict[Future[Any], _Episode], rollout: Rollout) -> None:
    budgets = [min(limits.max_new_tokens, limits.max_context - len(ep.traj.tokens))
               for ep in waiting]
    outputs = generator.generate([ep.traj.tokens for ep in waiting], budgets)
    for ep, ids in zip(waiting, outputs, strict=True):
        if not ids:
            raise RuntimeError("the generator returned no token; it must return at least one")
        ep.traj.append(ids, policy=True)
        rollout.generated_tokens += len(ids)
        action = chat.tokenizer.decode(ids, skip_special_tokens=True)
        ep.traj.turns.append(Turn(action=action, tokens=len(ids)))
        pending[slots.step(ep.env, action)] = ep


def _on_reset(ep: _Episode, result: Any, chat: ChatFormat, limits: Limits) -> bool:
    obs, info = result
    ep.traj.task_id = str(info.get("task_id", ""))
    ep.traj.env_record = str(info.get("record", ""))
    fork = ep.traj.job.fork
    if fork is not None:  # the shared prefix, its last observation included, is context
        ep.traj.fork = fork.describe()
        ids = list(fork.tokens)
    elif info.get("start") == "failure":  # an earlier failed episode's turns are context
        ep.traj.fork = {"failure": info.get("failure"), "prefix_turns": len(info["prefix_turns"])}
        ids = chat.continuation_ids(str(info["prompt"]), info.get("tools"), info["prefix_turns"])
    else:
        ids = chat.prompt_ids(str(obs), info.get("tools"))
    if len(ids) >= limits.max_context:
        ep.traj.cut = "max_context"  # no room for a single action: nothing to learn from
        return False
    ep.traj.append(ids, policy=False)
    return True


def _on_step(ep: _Episode, result: Any, seconds: float, chat: ChatFormat, limits: Limits) -> bool:
    obs, reward, terminated, truncated, info = result
    traj, turn = ep.traj, ep.traj.turns[-1]
    turn.observation, turn.reward, turn.env_seconds, turn.info = str(obs), float(reward), \
        seconds, _json_safe(info)
    traj.rewards[-1] += float(reward)  # the last id so far is this turn's last policy token
    traj.final_info = turn.info
    if terminated:
        traj.terminated = True
        return False
    if truncated:
        traj.cut = "env_truncated"
    elif len(traj.turns) >= limits.max_turns:
        traj.cut = "max_turns"
    ids = chat.observation_ids(str(obs), traj.tokens[-1])
    if len(traj.tokens) + len(ids) >= limits.max_context:
        traj.cut = traj.cut or "max_context"
        return False
    # Appended even when the episode is cut: the value after it is the bootstrap estimate.
    traj.append(ids, policy=False)
    return not traj.cut


def _timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, float]:
    t0 = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - t0


def _json_safe(value: Any) -> Any:
    """Info dicts end up in trajectories.jsonl: keep what JSON can hold, stringify the rest."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "item"):  # numpy / torch scalars
        try:
            return _json_safe(value.item())
        except (TypeError, ValueError):
            pass
    return str(value)
