"""Episodes lost with their worker: masked out of the batch, run again elsewhere, reported."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import torch

from repogym.agents.ppo.chat import ChatFormat
from repogym.agents.ppo.generation import HFGenerator
from repogym.agents.ppo.ppo import cluster_metrics, make_batch
from repogym.agents.ppo.rollout import EpisodeJob, Limits, LocalSlots, collect_rollouts
from repogym.agents.ppo.toy_env import ToyTextEnv
from repogym.envs.cluster.fleet import EpisodeLost


class DyingSlots(LocalSlots):
    """Local toy environments on two "nodes"; node B dies at its ``die_at``-th step: every
    call in flight there and after fails, and its slots never come back."""

    def __init__(self, pool: ThreadPoolExecutor, die_at: int, spare: bool = True) -> None:
        super().__init__([ToyTextEnv(turns=3) for _ in range(4)], pool)
        self.node_b, self.steps_b, self.die_at, self.dead = {2, 3}, 0, die_at, False
        if not spare:
            self._free = [2, 3]  # node A has no slot: nothing can take the lost episodes

    def where(self, slot: int) -> str:
        return "node-b" if slot in self.node_b else "node-a"

    def step(self, slot: int, action: Any) -> Future[tuple[Any, float]]:
        if slot in self.node_b:
            self.steps_b += 1
            self.dead = self.dead or self.steps_b >= self.die_at
            if self.dead:
                failed: Future[tuple[Any, float]] = Future()
                failed.set_exception(EpisodeLost("node-b", "worker lost: node stopped"))
                return failed
        return super().step(slot, action)

    def release(self, slot: int) -> None:
        if not (self.dead and slot in self.node_b):
            super().release(slot)



def jobs(n: int) -> list[EpisodeJob]:
    return [EpisodeJob(index=i, seed=100 + i, group=i) for i in range(n)]


def test_lost_episodes_are_masked_and_run_again_elsewhere(tiny: Any) -> None:
    lm, tok = tiny
    with ThreadPoolExecutor(4) as pool:
        slots = DyingSlots(pool, die_at=3)
        rollout = collect_rollouts(slots, HFGenerator(lm, tok, 1.0), ChatFormat(tok), jobs(8),
                                   Limits(5, 4, 1024), retries=1)
    lost = rollout.lost
    assert lost and all(x.where == "node-b" and x.retried for x in lost)
    # every job finished once, the retried ones on node A; nothing lost reached the batch
    assert [t.job.index for t in rollout.trajectories] == list(range(8))
    assert all(t.terminated and len(t.turns) == 3 for t in rollout.trajectories)
    for x in lost:
        [again] = [t for t in rollout.trajectories if t.job == x.job]
        assert again.where == "node-a"
    metrics = cluster_metrics(rollout, None)
    assert metrics["charts/episodes_lost"] == len(lost) == metrics["charts/episodes_retried"]
    assert metrics["perf/node/node-a/episodes_per_s"] > 0


def test_an_episode_out_of_retries_is_left_out_not_scored(tiny: Any) -> None:
    lm, tok = tiny
    with ThreadPoolExecutor(4) as pool:
        slots = DyingSlots(pool, die_at=1, spare=False)
        rollout = collect_rollouts(slots, HFGenerator(lm, tok, 1.0), ChatFormat(tok), jobs(3),
                                   Limits(5, 4, 1024), retries=1)
    assert rollout.trajectories == []  # no slot is left: nothing finished, nothing scored 0
    dropped = [x for x in rollout.lost if not x.retried]
    assert sorted(x.job.index for x in dropped) == [0, 1, 2]
    assert make_batch(rollout.trajectories, int(tok.pad_token_id), True,
                      torch.device("cpu")) is None
