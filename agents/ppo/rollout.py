"""Multi-turn rollouts: several environments at once, token ids kept exactly as sampled.

Environments run in a thread pool (their work is containers and I/O), and the policy generates
for whichever episodes are waiting while the others are still stepping, so container time
overlaps generation. Each episode is one token sequence: prompt and observations with loss mask
0, the policy's sampled ids with loss mask 1, and each step's reward on the last policy token of
that turn.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from repogym.agents.ppo.chat import ChatFormat
from repogym.agents.ppo.generation import Generator


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


@dataclass
class Rollout:
    trajectories: list[Trajectory]
    env_seconds: float = 0.0  # summed over workers: time spent inside reset/step
    generation_seconds: float = 0.0  # wall time spent generating
    wall_seconds: float = 0.0
    generated_tokens: int = 0


@dataclass
class _Episode:
    env: int
    traj: Trajectory


def collect_rollouts(envs: Sequence[gym.Env[Any, Any]], generator: Generator, chat: ChatFormat,
                     jobs: Sequence[EpisodeJob], limits: Limits, pool: Executor,
                     at_end: Callable[[gym.Env[Any, Any], Trajectory], None] | None = None
                     ) -> Rollout:
    """Runs every job to its end on the given environments and returns them in job order.

    ``at_end`` sees each episode's env and trajectory as it ends, before the env runs another.
    """
    rollout = Rollout([])
    queue, free = deque(jobs), list(range(len(envs)))
    pending: dict[Future[Any], _Episode] = {}
    waiting: list[_Episode] = []
    start = time.perf_counter()
    while queue or pending or waiting:
        while free and queue:
            job = queue.popleft()
            env = free.pop()
            ep = _Episode(env, Trajectory(job, env=env))
            options = {"snapshot": job.fork.snapshot} if job.fork is not None else None
            pending[pool.submit(_timed, envs[ep.env].reset, seed=job.seed, options=options)] = ep
        if not waiting:
            wait(list(pending), return_when=FIRST_COMPLETED)
        for fut in [f for f in pending if f.done()]:
            ep = pending.pop(fut)
            result, seconds = fut.result()  # an infrastructure failure raises here
            rollout.env_seconds += seconds
            alive = _on_reset(ep, result, chat, limits) if not ep.traj.turns else \
                _on_step(ep, result, seconds, chat, limits)
            if alive:
                waiting.append(ep)
            else:
                if at_end is not None:
                    at_end(envs[ep.env], ep.traj)
                rollout.trajectories.append(ep.traj)
                free.append(ep.env)
        if waiting:
            t0 = time.perf_counter()
            _act(waiting, generator, chat, limits, envs, pool, pending, rollout)
            rollout.generation_seconds += time.perf_counter() - t0
            waiting = []
    rollout.wall_seconds = time.perf_counter() - start
    rollout.trajectories.sort(key=lambda t: t.job.index)
    return rollout


def _act(waiting: list[_Episode], generator: Generator, chat: ChatFormat, limits: Limits,
         envs: Sequence[gym.Env[Any, Any]], pool: Executor, pending: dict[Future[Any], _Episode],
         rollout: Rollout) -> None:
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
        pending[pool.submit(_timed, envs[ep.env].step, action)] = ep


def _on_reset(ep: _Episode, result: Any, chat: ChatFormat, limits: Limits) -> bool:
    obs, info = result
    ep.traj.task_id = str(info.get("task_id", ""))
    ep.traj.env_record = str(info.get("record", ""))
    fork = ep.traj.job.fork
    if fork is not None:  # the shared prefix, its last observation included, is context
        ep.traj.fork = fork.describe()
        ids = list(fork.tokens)
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
