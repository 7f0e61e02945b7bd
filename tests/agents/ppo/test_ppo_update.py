"""One PPO update on a real rollout of the tiny model: masks, first-step ratio, KL, dropout."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import torch

from repogym.agents.ppo.chat import ChatFormat
from repogym.agents.ppo.config import TrainConfig
from repogym.agents.ppo.generation import HFGenerator
from repogym.agents.ppo.policy import make_policy, tiny_model, token_logprobs
from repogym.agents.ppo.ppo import (
    Batch,
    Scores,
    compute_gae,
    make_batch,
    ppo_update,
    score_batch,
    whiten,
)
from repogym.agents.ppo.rollout import EpisodeJob, Limits, collect_rollouts
from repogym.agents.ppo.toy_env import ToyTextEnv

CPU = torch.device("cpu")



def setup(config: TrainConfig, lm_kwargs: dict[str, Any] | None = None
          ) -> tuple[Any, Batch, Scores, torch.Tensor, torch.Tensor | None, Any]:
    """A policy, a rollout of four 3-turn toy episodes, and everything an update needs."""
    lm, tok = tiny_model(seed=0)
    for name, value in (lm_kwargs or {}).items():
        setattr(lm.config, name, value)
    ref = tiny_model(seed=0)[0] if config.kl_coef > 0 and config.lora_rank == 0 else None
    policy = make_policy(lm, config, CPU, ref)
    torch.manual_seed(1)
    with ThreadPoolExecutor(2) as pool:
        rollout = collect_rollouts(
            [ToyTextEnv(turns=3) for _ in range(2)], HFGenerator(policy.lm, tok, 1.0),
            ChatFormat(tok), [EpisodeJob(i, i, i) for i in range(4)], Limits(3, 6, 1024), pool)
    batch = make_batch(rollout.trajectories, 0, config.bootstrap, CPU)
    assert batch is not None
    scores = score_batch(policy, batch, config)
    returns = None
    if config.critic:
        assert scores.values is not None
        adv, returns = compute_gae(batch, scores.values, config.gamma, config.lam)
    else:
        adv = torch.randn_like(batch.rewards) * batch.policy_mask
    adv = whiten(adv, batch.policy_mask)
    optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=1e-2)
    return policy, batch, scores, adv, returns, optimizer


def test_observation_and_prompt_tokens_get_exactly_zero_gradient() -> None:
    config = TrainConfig(kl_coef=0.1, ent_coef=0.01, micro_batch_size=4)
    policy, batch, scores, adv, returns, optimizer = setup(config)
    captured: list[torch.Tensor] = []

    def keep_logits(module: Any, inputs: Any, output: Any) -> None:
        if output.logits.requires_grad:
            output.logits.retain_grad()
            captured.append(output.logits)

    handle = policy.lm.register_forward_hook(keep_logits)
    try:
        ppo_update(policy, optimizer, batch, scores, adv, returns, config)
    finally:
        handle.remove()
    assert len(captured) == 1 and captured[0].grad is not None
    grad = captured[0].grad[:, :-1].abs().sum(-1)  # position t scores token t + 1
    width = grad.shape[1]
    policy_pos = batch.policy_mask[:, :width].bool()
    real = torch.arange(width)[None] < (batch.lengths[:, None] - 1)
    assert (grad[~policy_pos] == 0).all(), "a prompt or observation token got a gradient"
    assert (grad[policy_pos] > 0).all()
    assert (real & ~policy_pos).sum() > 50  # the test did look at many non-policy tokens


@pytest.mark.parametrize("lora_rank", [0, 4])
def test_ratio_is_one_and_kl_zero_before_the_first_update(lora_rank: int) -> None:
    config = TrainConfig(kl_coef=0.05, lora_rank=lora_rank, micro_batch_size=2,
                         gradient_checkpointing=True)
    policy, batch, scores, adv, returns, optimizer = setup(config)
    assert scores.ref_logprobs is not None
    mask = batch.policy_mask.bool()
    assert torch.allclose(scores.ref_logprobs[mask], scores.logprobs[mask], atol=1e-6)
    first = ppo_update(policy, optimizer, batch, scores, adv, returns, config)
    assert first["losses/first_ratio_dev"] < 1e-5
    assert first["losses/approx_kl"] < 1e-9  # one optimiser step: every micro-batch saw ratio 1
    assert first["losses/kl"] < 1e-9
    assert first["losses/clip_fraction"] == 0.0
    second = ppo_update(policy, optimizer, batch, scores, adv, returns, config)
    assert second["losses/kl"] > 1e-6, "the reference moved with the policy"
    assert second["losses/first_ratio_dev"] > 1e-4


def test_dropout_is_off_so_train_and_eval_agree() -> None:
    config = TrainConfig(gradient_checkpointing=True)
    lm, tok = tiny_model(seed=0)
    # A checkpoint that trains with dropout: the policy must still score deterministically.
    for layer in lm.model.layers:
        layer.self_attn.attention_dropout = 0.5
    policy = make_policy(lm, config, CPU)
    ids = torch.randint(3, 250, (2, 40))
    attn = torch.ones_like(ids)
    with torch.no_grad():
        old = token_logprobs(policy, ids, attn, 1.0).logprobs
    new_a = token_logprobs(policy, ids, attn, 1.0, with_values=True).logprobs
    new_b = token_logprobs(policy, ids, attn, 1.0, with_values=True).logprobs
    assert policy.lm.training  # gradient checkpointing needs train mode for the grad pass
    assert torch.equal(new_a, new_b)
    assert torch.allclose(old, new_a, atol=1e-6)


def test_value_head_starts_at_zero() -> None:
    policy = make_policy(tiny_model(seed=0)[0], TrainConfig(), CPU)
    ids = torch.randint(3, 250, (1, 12))
    with torch.no_grad():
        out = token_logprobs(policy, ids, torch.ones_like(ids), 1.0, with_values=True)
    assert out.values is not None and out.values.abs().sum() == 0
