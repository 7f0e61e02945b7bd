"""`--fork-at K`: a group's samples branch from one shared prefix of K turns."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from repogym.agents.ppo import TrainConfig, train
from repogym.agents.ppo.chat import ChatFormat
from repogym.agents.ppo.generation import HFGenerator
from repogym.agents.ppo.policy import tiny_model
from repogym.agents.ppo.rollout import EpisodeJob, Limits
from repogym.agents.ppo.shared_prefix import collect_forked
from repogym.agents.ppo.toy_env import TOY_ID, ToyTextEnv


def test_branches_share_their_groups_prefix_and_learn_only_their_own_turns(
        tmp_path: Path) -> None:
    lm, tok = tiny_model(seed=0)
    envs = [ToyTextEnv(turns=4, record_dir=tmp_path) for _ in range(3)]
    jobs = [EpisodeJob(index=g * 3 + k, seed=10 + g, group=g) for g in range(2) for k in range(3)]
    with ThreadPoolExecutor(max_workers=3) as pool:
        rollout = collect_forked(envs, HFGenerator(lm.eval(), tok, 1.0), ChatFormat(tok), jobs,
                                 Limits(10, 6, 2048), pool, fork_at=2)
    trajs = rollout.trajectories
    assert [t.job.index for t in trajs] == list(range(6))
    for g in range(2):
        group = [t for t in trajs if t.job.group == g]
        n = group[0].fork["prefix_tokens"]
        prefixes = {tuple(t.tokens[:n]) for t in group}
        assert len(prefixes) == 1  # one prefix, played once
        for t in group:
            assert t.fork["fork_at"] == 2 and t.fork["snapshot"]
            assert t.policy_mask[:n] == [0] * n  # the shared prefix is context, not learned
            assert sum(t.policy_mask[n:]) > 0 and len(t.turns) == 2  # turns 3 and 4
            assert t.terminated and t.task_id == group[0].task_id
            reset = json.loads(Path(t.env_record).read_text().splitlines()[0])
            assert reset["fork"]["snapshot"] == t.fork["snapshot"]
            assert t.fork["prefix_record"] != t.env_record  # the prefix has its own record
    assert rollout.generated_tokens > sum(sum(t.policy_mask) for t in trajs)  # + the prefixes


def test_a_prefix_that_ends_early_leaves_its_group_at_the_start(tmp_path: Path) -> None:
    lm, tok = tiny_model(seed=0)
    jobs = [EpisodeJob(index=k, seed=5, group=0) for k in range(2)]
    with ThreadPoolExecutor(max_workers=1) as pool:
        rollout = collect_forked([ToyTextEnv(turns=1)], HFGenerator(lm.eval(), tok, 1.0),
                                 ChatFormat(tok), jobs, Limits(10, 6, 2048), pool, fork_at=3)
    assert all(t.fork == {} and len(t.turns) == 1 for t in rollout.trajectories)


def test_fork_at_needs_a_group() -> None:
    with pytest.raises(ValueError, match="group_size >= 2"):
        TrainConfig(fork_at=2, group_size=1)


def test_train_with_fork_at_writes_the_branches_parents(tmp_path: Path) -> None:
    config = TrainConfig(out=str(tmp_path), env_id=TOY_ID, suite="", model="tiny", device="cpu",
                         updates=1, episodes_per_update=4, group_size=2, advantage="grpo",
                         fork_at=1, num_envs=2, max_turns=2, max_new_tokens=6,
                         max_context=512, tensorboard=False, save_every=0,
                         env_kwargs='{"turns": 3}')
    result = train(config)
    assert result.metrics[0]["losses/policy_loss"] is not None
    rows = [json.loads(line) for line in (tmp_path / "trajectories.jsonl").read_text()
            .splitlines()]
    assert len(rows) == 4 and all(r["fork"]["fork_at"] == 1 for r in rows)
    assert len({r["fork"]["snapshot"] for r in rows}) == 2  # one per group
    assert json.loads((tmp_path / "config.json").read_text())["fork_at"] == 1
