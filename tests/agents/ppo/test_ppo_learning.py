"""The agent learns when, and only when, the reward depends on what it writes.

On `repogym/ToyText-v0` the reward is the share of lowercase letters in the policy's own text
(about 0.2 for the random tiny model); on the control env the same score is computed on a string
the environment draws itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from repogym.agents.ppo import TrainConfig, train
from repogym.agents.ppo.toy_env import CONTROL_ID, TOY_ID

pytestmark = pytest.mark.slow



def learn(out: Path, **overrides: Any) -> list[float]:
    settings: dict[str, Any] = {
        "out": str(out), "env_id": TOY_ID, "suite": "", "model": "tiny", "device": "cpu",
        "updates": 22, "episodes_per_update": 16, "num_envs": 16, "max_turns": 2,
        "max_new_tokens": 8, "max_context": 512, "lr": 1e-2, "micro_batch_size": 8,
        "tensorboard": False, "record_env": False, "save_every": 0,
    }
    settings.update(overrides)
    result = train(TrainConfig(**settings))
    return [m["charts/reward"] for m in result.metrics]


def assert_learns(rewards: list[float]) -> None:
    assert rewards[0] < 0.4, f"the untrained policy should be near chance (0.2): {rewards}"
    assert sum(rewards[-3:]) / 3 > 0.8, f"mean reward did not rise above 0.8: {rewards}"


def test_ppo_learns_the_toy_task(tmp_path: Path) -> None:
    assert_learns(learn(tmp_path))


def test_grpo_learns_the_toy_task(tmp_path: Path) -> None:
    assert_learns(learn(tmp_path, advantage="grpo", group_size=4))


def test_reward_that_ignores_the_policy_stays_flat(tmp_path: Path) -> None:
    rewards = learn(tmp_path, env_id=CONTROL_ID, updates=15)
    first, last = sum(rewards[:5]) / 5, sum(rewards[-5:]) / 5
    # The control's score of a random printable string averages 26/95 = 0.27.
    assert 0.15 < first < 0.4 and 0.15 < last < 0.4, rewards
    assert abs(last - first) < 0.12, rewards
