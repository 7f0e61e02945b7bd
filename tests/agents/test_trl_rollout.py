"""TRL's GRPO trainer runs two steps against the demo suite in Docker through the rollout hook."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from repogym.agents.trl_rollout import RolloutConfig, _task_id

pytest.importorskip("trl")


def test_config_and_prompts() -> None:
    with pytest.raises(ValueError, match="budgets"):
        RolloutConfig(max_turns=0)
    assert _task_id("demo__textkit-1 ") == "demo__textkit-1"
    assert _task_id([{"role": "user", "content": "demo__minicalc-2"}]) == "demo__minicalc-2"


@pytest.mark.docker
@pytest.mark.slow
def test_two_grpo_steps_on_the_demo_suite(tmp_path: Path) -> None:
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from repogym.agents.ppo.policy import tiny_model
    from repogym.agents.trl_rollout import RepogymRollout, env_reward

    class Recording(RepogymRollout):
        outputs: list[dict[str, Any]] = []

        def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
            out = super().__call__(prompts, trainer)
            self.outputs.append(out)
            return out

    lm, tokenizer = tiny_model(0, max_context=8192)
    rollout = Recording(RolloutConfig(suite="demo", max_turns=2, max_new_tokens=8,
                                      max_context=8192))
    rewards_seen: list[list[float]] = []

    def reward(completions: list[Any], reward: list[float], **kwargs: Any) -> list[float]:
        rewards_seen.append(list(reward))
        return env_reward(completions, reward, **kwargs)

    args = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=2, num_generations=2,
                      max_steps=2, use_cpu=True, report_to=[], logging_steps=1,
                      save_strategy="no", beta=0.0, learning_rate=1e-4, bf16=False)
    trainer = GRPOTrainer(model=lm, processing_class=tokenizer, reward_funcs=reward, args=args,
                          train_dataset=Dataset.from_list([{"prompt": "demo__minicalc-2"},
                                                           {"prompt": "demo__stockroom-3"}]),
                          rollout_func=rollout)
    try:
        trainer.train()
    finally:
        rollout.close()
    assert trainer.state.global_step == 2
    assert len(rollout.outputs) == 2 and len(rewards_seen) == 2
    for out in rollout.outputs:
        assert len(out["prompt_ids"]) == 2 and set(out["task_id"]) <= {"demo__stockroom-3",
                                                                       "demo__minicalc-2"}
        for prompt, ids, lps, mask in zip(out["prompt_ids"], out["completion_ids"],
                                          out["logprobs"], out["env_mask"], strict=True):
            assert len(prompt) > 100 and len(ids) == len(lps) == len(mask)
            # model turn, the observation as the next chat turn, model turn
            assert mask[0] == 1 and 0 in mask and mask[-1] == 1
            assert all(lp <= 0.0 for lp, m in zip(lps, mask, strict=True) if m)
            assert tokenizer.decode(prompt).count("<|assistant|>") == 1
        assert all(isinstance(r, float) for r in out["reward"])  # graded: the model submitted


def test_each_group_of_prompts_plays_one_draw_of_the_curriculum(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from repogym.agents.ppo.policy import tiny_model
    from repogym.agents.trl_rollout import RepogymRollout, task_dataset
    from repogym.envs.curriculum import EpisodeResult, StatsStore
    from repogym.suite import load_suite

    only, store = "demo__stockroom-3", StatsStore(tmp_path / "stats.json")
    for task in load_suite("demo", "train"):  # only `only` has a recent rate in 0.1-0.9
        for k in range(8):
            solved = k % 2 == 0 if task.instance_id == only else False
            store.record(EpisodeResult(task.instance_id, True, solved, float(solved), 1))
    with pytest.raises(ValueError, match="unknown name"):
        RolloutConfig(sampler="bandwidth")
    lm, tokenizer = tiny_model(0, max_context=8192)
    trainer = SimpleNamespace(processing_class=tokenizer, model=lm,
                              accelerator=SimpleNamespace(unwrap_model=lambda m: m))
    rollout = RepogymRollout(RolloutConfig(
        suite="demo", max_turns=1, max_new_tokens=4, max_context=8192,
        sampler="band:0.1-0.9,explore=0", stats=str(tmp_path / "stats.json"),
        env_kwargs={"sandbox": "fake"}))
    try:
        prompts = [row["prompt"] for row in task_dataset(sampled=2)]
        assert prompts == ["sample-0", "sample-1"]
        out = rollout([prompts[0], prompts[0], prompts[1], prompts[1]], trainer)
    finally:
        rollout.close()
    assert out["task_id"] == [only] * 4
    saved = StatsStore(tmp_path / "stats.json").table()  # every episode was graded, counted
    assert saved.get(only).attempts == 8 + 4 and saved.episodes == 8 * 5 + 4
