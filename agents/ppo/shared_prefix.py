"""``--fork-at K``: the samples of a group start from one shared prefix instead of the start.

  1. PREFIX    one episode per group: the policy plays its first K turns, then the env is
               snapshotted there (``env.unwrapped.snapshot()``).
  2. BRANCHES  ``group_size`` episodes per group, each reset from that snapshot
               (``options={"snapshot": ...}``): the prefix's tokens open every branch with loss
               mask 0 and the branch's own turns follow. The branches share the prefix, so a
               group-relative advantage (GRPO, RLOO) says nothing about it; only what they do
               differently is learned.

A prefix that ends before K turns (it submitted, or a cap cut it) cannot be branched: its group
starts from the task's start as without ``--fork-at``. Each branch's trajectory names its
prefix (``fork``), and the env's record of the branch names the prefix's record.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, replace
from typing import Any

import gymnasium as gym

from repogym.agents.ppo.chat import ChatFormat
from repogym.agents.ppo.generation import Generator
from repogym.agents.ppo.rollout import EpisodeJob, Limits, Rollout, Trajectory, collect_rollouts


@dataclass(frozen=True)
class Prefix:
    """A group's shared start: the env's snapshot and the tokens up to it."""

    snapshot: Any
    tokens: tuple[int, ...]
    turns: int
    record: str  # the prefix episode's own record

    def describe(self) -> dict[str, Any]:
        snap_id = getattr(self.snapshot, "id", None) or (
            self.snapshot.get("id") if isinstance(self.snapshot, dict) else None)
        return {"snapshot": snap_id, "fork_at": self.turns, "prefix_record": self.record,
                "prefix_tokens": len(self.tokens)}


def collect_forked(envs: Sequence[gym.Env[Any, Any]], generator: Generator, chat: ChatFormat,
                   jobs: Sequence[EpisodeJob], limits: Limits, pool: Executor,
                   fork_at: int) -> Rollout:
    """Runs one K-turn prefix per group, then every job of the group from its snapshot."""
    heads = {j.group: j for j in reversed(jobs)}  # the first job of each group
    snapshots: dict[int, Any] = {}

    def keep(env: gym.Env[Any, Any], traj: Trajectory) -> None:
        if traj.cut == "max_turns" and not traj.terminated:  # still running at turn K
            snapshots[traj.job.group] = env.unwrapped.snapshot()  # type: ignore[attr-defined]

    prefixes = collect_rollouts(envs, generator, chat, list(heads.values()),
                                replace(limits, max_turns=fork_at), pool, at_end=keep)
    by_group = {t.job.group: t for t in prefixes.trajectories}
    branched = [replace(job, fork=_prefix(by_group[job.group], snapshots.get(job.group)))
                for job in jobs]
    try:
        rollout = collect_rollouts(envs, generator, chat, branched, limits, pool)
    finally:
        for snap in snapshots.values():
            delete = getattr(snap, "delete", None)
            if delete is not None:
                delete()
    rollout.env_seconds += prefixes.env_seconds
    rollout.generation_seconds += prefixes.generation_seconds
    rollout.wall_seconds += prefixes.wall_seconds
    rollout.generated_tokens += prefixes.generated_tokens
    return rollout


def _prefix(traj: Trajectory, snapshot: Any) -> Prefix | None:
    if snapshot is None:
        return None
    return Prefix(snapshot, tuple(traj.tokens), len(traj.turns), traj.env_record)
