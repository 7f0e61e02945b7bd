"""Advantages and losses on hand-made batches whose answers are known."""

from __future__ import annotations

import pytest
import torch

from repogym.agents.ppo.ppo import (
    Batch,
    compute_gae,
    group_advantages,
    kl_to_reference,
    make_batch,
    policy_loss,
    value_loss,
    whiten,
)
from repogym.agents.ppo.rollout import EpisodeJob, Trajectory

CPU = torch.device("cpu")


def episode(segments: list[tuple[int, bool]], reward: float, *, cut: str = "",
            group: int = 0) -> Trajectory:
    """Segments of (length, is_policy); the reward goes on the last token, a policy token."""
    t = Trajectory(EpisodeJob(index=0, seed=0, group=group), terminated=not cut, cut=cut)
    for length, is_policy in segments:
        t.append(list(range(10, 10 + length)), policy=is_policy)
    t.rewards[-1] = reward
    return t


# prompt 3, action 2, observation 2, action 3 (10 tokens; 5 policy tokens)
SHAPE = [(3, False), (2, True), (2, False), (3, True)]


def test_batch_alignment_puts_the_reward_on_the_last_policy_token() -> None:
    batch = make_batch([episode(SHAPE, 1.0)], pad_id=0, bootstrap=True, device=CPU)
    assert batch is not None
    # index t scores token t + 1: policy tokens are 3, 4, 7, 8, 9
    assert batch.policy_mask[0].tolist() == [0, 0, 1, 1, 0, 0, 1, 1, 1]
    assert batch.rewards[0].tolist() == [0, 0, 0, 0, 0, 0, 0, 0, 1.0]


def test_cut_episodes_are_masked_or_bootstrapped_never_scored_zero() -> None:
    trajs = [episode(SHAPE, 1.0), episode(SHAPE + [(2, False)], 0.0, cut="max_turns")]
    masked = make_batch(trajs, 0, bootstrap=False, device=CPU)
    assert masked is not None
    assert masked.policy_mask[1].sum() == 0 and masked.policy_mask[0].sum() == 5
    boot = make_batch(trajs, 0, bootstrap=True, device=CPU)
    assert boot is not None
    assert boot.policy_mask[1].sum() == 5 and boot.bootstrap.tolist() == [False, True]
    values = torch.zeros(2, 12)
    values[1, 11] = 0.7  # the value after the cut episode's last (observation) token
    adv, returns = compute_gae(boot, values, gamma=1.0, lam=1.0)
    assert adv[1][boot.policy_mask[1].bool()].tolist() == pytest.approx([0.7] * 5)
    assert adv[0][boot.policy_mask[0].bool()].tolist() == pytest.approx([1.0] * 5)
    assert torch.equal(returns, adv)  # values were 0


def test_gae_skips_observation_tokens_and_matches_the_formula() -> None:
    batch = make_batch([episode(SHAPE, 2.0)], 0, bootstrap=True, device=CPU)
    assert batch is not None
    values = torch.arange(10, dtype=torch.float32)[None] / 10  # V[t] = t / 10
    gamma, lam = 0.9, 0.8
    adv, returns = compute_gae(batch, values, gamma, lam)
    pos = [2, 3, 6, 7, 8]  # policy positions; observation positions 4, 5 are skipped
    v = [values[0, p].item() for p in pos] + [0.0]  # terminated: 0 after the last token
    r = [0, 0, 0, 0, 2.0]
    expected, running = [0.0] * 5, 0.0
    for k in reversed(range(5)):
        running = r[k] + gamma * v[k + 1] - v[k] + gamma * lam * running
        expected[k] = running
    assert [adv[0, p].item() for p in pos] == pytest.approx(expected)
    assert adv[0, [0, 1, 4, 5]].abs().sum() == 0
    assert [returns[0, p].item() for p in pos] == pytest.approx(
        [e + values[0, p].item() for e, p in zip(expected, pos, strict=True)])


def test_gamma_lambda_one_gives_reward_minus_value() -> None:
    batch = make_batch([episode(SHAPE, 1.0)], 0, bootstrap=True, device=CPU)
    assert batch is not None
    values = torch.full((1, 10), 0.25)
    adv, _ = compute_gae(batch, values, 1.0, 1.0)
    assert adv[0][batch.policy_mask[0].bool()].tolist() == pytest.approx([0.75] * 5)


def grouped(rewards: list[float], groups: list[int], cut: frozenset[int] = frozenset()) -> Batch:
    trajs = [episode(SHAPE, r, group=g, cut="max_turns" if i in cut else "")
             for i, (r, g) in enumerate(zip(rewards, groups, strict=True))]
    batch = make_batch(trajs, 0, bootstrap=False, device=CPU)
    assert batch is not None
    return batch


def test_grpo_and_rloo_compare_samples_of_the_same_task() -> None:
    batch = grouped([1.0, 0.0, 0.0, 0.0, 5.0, 5.0], [0, 0, 0, 0, 1, 1])
    r = torch.tensor([1.0, 0.0, 0.0, 0.0])
    grpo = group_advantages(batch, "grpo")
    assert grpo[:4, 8].tolist() == pytest.approx(((r - r.mean()) / r.std()).tolist(), rel=1e-4)
    rloo = group_advantages(batch, "rloo")
    assert rloo[:4, 8].tolist() == pytest.approx([1.0, -1 / 3, -1 / 3, -1 / 3])
    assert grpo[4:].abs().sum() == 0 and rloo[4:].abs().sum() == 0  # equal rewards: no signal
    assert torch.equal(grpo != 0, (batch.policy_mask != 0) & (grpo != 0))  # policy tokens only


def test_cut_samples_leave_their_group() -> None:
    batch = grouped([1.0, 0.0, 0.0], [0, 0, 0], cut=frozenset({2}))
    adv = group_advantages(batch, "rloo")
    assert adv[:2, 8].tolist() == pytest.approx([1.0, -1.0])
    assert adv[2].abs().sum() == 0


def test_whitening_uses_policy_tokens_only() -> None:
    x = torch.tensor([[1.0, 2.0, 3.0, 100.0], [4.0, 5.0, -50.0, 6.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 1.0]])
    w = whiten(x, mask)
    picked = w[mask.bool()]
    assert picked.mean().item() == pytest.approx(0.0, abs=1e-6)
    assert picked.std().item() == pytest.approx(1.0, abs=1e-4)
    assert w[0, 3] == 0 and w[1, 2] == 0


def test_clipping_is_asymmetric_and_stops_the_gradient() -> None:
    old = torch.zeros(1, 4)
    mask = torch.ones(1, 4)
    adv = torch.tensor([[1.0, 1.0, -1.0, -1.0]])
    # ratios 1.25 (inside +0.28), 1.35 (outside), 0.85 (inside -0.2), 0.75 (outside)
    new = torch.log(torch.tensor([[1.25, 1.35, 0.85, 0.75]])).requires_grad_()
    loss, stats = policy_loss(new, old, adv, mask, clip_low=0.2, clip_high=0.28, n_tokens=4)
    loss.backward()
    assert new.grad is not None
    assert [g != 0 for g in new.grad[0].tolist()] == [True, False, True, False]
    assert stats["clip_sum"] == 2.0
    expected = -(1.25 + 1.28 - 0.85 - 0.8) / 4
    assert loss.item() == pytest.approx(expected, rel=1e-5)


def test_value_loss_is_clipped_around_the_old_value() -> None:
    old = torch.zeros(1, 2)
    returns = torch.tensor([[1.0, 1.0]])
    values = torch.tensor([[0.5, 0.1]], requires_grad=True)
    loss = value_loss(values, old, returns, torch.ones(1, 2), clip=0.2, n_tokens=2)
    # token 0: clipped 0.2 -> (0.8)^2 beats (0.5)^2; token 1: (0.9)^2 both ways
    assert loss.item() == pytest.approx(0.5 * (0.64 + 0.81) / 2)
    loss.backward()
    assert values.grad is not None and values.grad[0, 0] == 0 and values.grad[0, 1] != 0


def test_kl_to_reference_is_zero_for_equal_policies_and_positive_otherwise() -> None:
    logp = torch.log(torch.tensor([[0.2, 0.5, 0.9]]))
    mask = torch.ones(1, 3)
    assert kl_to_reference(logp, logp.clone(), mask, 3).item() == 0.0
    assert kl_to_reference(logp, logp - 0.3, mask, 3).item() > 0
