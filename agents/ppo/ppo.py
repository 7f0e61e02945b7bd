"""Multi-turn PPO for language-model agents, readable top to bottom.

Each update:
  1. ROLLOUTS   run `episodes_per_update` episodes on `num_envs` environments at once; the
                policy's sampled ids are kept as they are, observations go in with loss mask 0.
                With `--fork-at K` a group's samples branch from one shared K-turn prefix.
  2. SCORING    one function (`token_logprobs`) gives the old log-probs, the values and the
                reference log-probs, with dropout off.
  3. ADVANTAGES token-level GAE over policy tokens only, the reward on the last policy token
                (gamma = lambda = 1 by default); or critic-free GRPO / RLOO over groups of
                samples of one task. Whitened over policy tokens.
  4. OPTIMISE   clipped objective with separate low/high clip (DAPO, arXiv:2503.14476),
                clipped value loss, KL to a frozen reference (k3 estimator, Schulman 2020),
                entropy bonus; micro-batches accumulate into one optimiser step per minibatch.
  5. LOG        metrics.jsonl + TensorBoard, every trajectory, checkpoints.

An episode cut by a limit (turns, context, the env's own truncation) is never scored as a real
0: with a critic its return is bootstrapped from the value after its last token, without one it
is masked out of the loss.
"""

from __future__ import annotations

import random
import resource
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

import repogym  # noqa: F401  (registers repogym/SWE-v0)
from repogym.agents.ppo import toy_env  # noqa: F401  (registers the toy environments)
from repogym.agents.ppo.chat import ChatFormat
from repogym.agents.ppo.config import TrainConfig
from repogym.agents.ppo.curriculum import GroupDraws, curriculum_metrics, stats_path
from repogym.agents.ppo.generation import HFGenerator
from repogym.agents.ppo.policy import Policy, load_policy, resolve_device, token_logprobs
from repogym.agents.ppo.rollout import EpisodeJob, Limits, Rollout, Trajectory, collect_rollouts
from repogym.agents.ppo.runlog import (
    RunLogger,
    find_checkpoint,
    restore_trainer,
    save_checkpoint,
)
from repogym.agents.ppo.shared_prefix import collect_forked
from repogym.envs.cluster.fleet import Fleet, FleetConfig

SWE_ENV_ID = "repogym/SWE-v0"


@dataclass
class TrainResult:
    run_dir: Path
    metrics: list[dict[str, Any]] = field(default_factory=list)
    checkpoint: Path | None = None


# =============================================================================================
# batch: trajectories -> padded tensors aligned with the log-probs (index t scores token t + 1)
# =============================================================================================


@dataclass
class Batch:
    trajectories: list[Trajectory]
    input_ids: torch.Tensor  # [N, L]
    attention_mask: torch.Tensor  # [N, L]
    lengths: torch.Tensor  # [N]
    policy_mask: torch.Tensor  # [N, L-1] float: 1 where token t + 1 was sampled and is learned
    rewards: torch.Tensor  # [N, L-1]: reward of token t + 1
    bootstrap: torch.Tensor  # [N] bool: the episode was cut and takes the value after its end
    groups: torch.Tensor  # [N]

    @property
    def n_policy_tokens(self) -> int:
        return int(self.policy_mask.sum().item())


def make_batch(trajs: list[Trajectory], pad_id: int, bootstrap: bool,
               device: torch.device) -> Batch | None:
    """Drops episodes without a policy token; masks cut ones out unless they bootstrap."""
    trajs = [t for t in trajs if sum(t.policy_mask) > 0]
    if not trajs:
        return None
    n, width = len(trajs), max(len(t.tokens) for t in trajs)
    ids = torch.full((n, width), pad_id, dtype=torch.long)
    attn = torch.zeros((n, width), dtype=torch.long)
    pmask = torch.zeros((n, width - 1))
    rewards = torch.zeros((n, width - 1))
    for i, t in enumerate(trajs):
        length = len(t.tokens)
        ids[i, :length] = torch.tensor(t.tokens)
        attn[i, :length] = 1
        learn = t.terminated or bootstrap
        pmask[i, :length - 1] = torch.tensor(t.policy_mask[1:], dtype=torch.float) * learn
        rewards[i, :length - 1] = torch.tensor(t.rewards[1:])
    cut = torch.tensor([bool(t.cut) and bootstrap for t in trajs])
    lengths = torch.tensor([len(t.tokens) for t in trajs])
    groups = torch.tensor([t.job.group for t in trajs])
    return Batch(trajs, ids.to(device), attn.to(device), lengths.to(device), pmask.to(device),
                 rewards.to(device), cut.to(device), groups.to(device))


def micro_slice(batch: Batch, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Rows of the batch trimmed to their own longest sequence."""
    width = int(batch.lengths[rows].max().item())
    return batch.input_ids[rows, :width], batch.attention_mask[rows, :width], width


# =============================================================================================
# scoring: old log-probs, values, reference log-probs (no gradient)
# =============================================================================================


@dataclass
class Scores:
    logprobs: torch.Tensor  # [N, L-1]
    values: torch.Tensor | None  # [N, L]
    ref_logprobs: torch.Tensor | None  # [N, L-1]


@torch.no_grad()
def score_batch(policy: Policy, batch: Batch, config: TrainConfig) -> Scores:
    n, width = batch.input_ids.shape
    logp = torch.zeros((n, width - 1), device=batch.input_ids.device)
    values = torch.zeros((n, width), device=logp.device) if config.critic else None
    ref = torch.zeros_like(logp) if policy.has_reference else None
    for rows in torch.arange(n, device=logp.device).split(config.micro_batch_size):
        ids, attn, w = micro_slice(batch, rows)
        out = token_logprobs(policy, ids, attn, config.temperature, with_values=config.critic)
        logp[rows, :w - 1] = out.logprobs
        if values is not None and out.values is not None:
            values[rows, :w] = out.values
        if ref is not None:
            ref[rows, :w - 1] = token_logprobs(policy, ids, attn, config.temperature,
                                               reference=True).logprobs
    return Scores(logp, values, ref)


# =============================================================================================
# advantages
# =============================================================================================


def compute_gae(batch: Batch, values: torch.Tensor, gamma: float, lam: float
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """Token-level GAE over policy tokens only; observation tokens are skipped, not discounted.

    The state before policy token t + 1 is valued by `values[:, t]`. After the last policy
    token the next value is 0 for a terminated episode and, for a cut one, the value after the
    episode's last token (the bootstrap).
    """
    adv = torch.zeros_like(batch.rewards)
    mask, rewards = batch.policy_mask.cpu(), batch.rewards.cpu()
    vals = values.float().cpu()
    for i in range(mask.shape[0]):
        idx = mask[i].nonzero().squeeze(-1)
        if idx.numel() == 0:
            continue
        r, v = rewards[i, idx].tolist(), vals[i, idx].tolist()
        length = int(batch.lengths[i].item())
        next_v = float(vals[i, length - 1]) if bool(batch.bootstrap[i]) else 0.0
        running, out = 0.0, [0.0] * len(r)
        for k in range(len(r) - 1, -1, -1):
            delta = r[k] + gamma * next_v - v[k]
            running = delta + gamma * lam * running
            out[k], next_v = running, v[k]
        adv[i, idx.to(adv.device)] = torch.tensor(out, device=adv.device)
    returns = (adv + values[:, :-1]) * batch.policy_mask
    return adv, returns


def group_advantages(batch: Batch, method: str) -> torch.Tensor:
    """GRPO (arXiv:2402.03300) or RLOO (arXiv:2402.14740): each episode's return against the
    other samples of the same task, spread over its policy tokens."""
    returns = (batch.rewards * batch.policy_mask).sum(1)
    valid = batch.policy_mask.sum(1) > 0
    adv = torch.zeros_like(returns)
    for g in batch.groups.unique():
        members = (batch.groups == g) & valid
        k = int(members.sum().item())
        if k < 2:
            continue  # nothing to compare with
        r = returns[members]
        centred = r - r.mean()
        adv[members] = centred / (r.std() + 1e-6) if method == "grpo" else centred * k / (k - 1)
    return adv[:, None] * batch.policy_mask


def whiten(x: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    n = mask.sum()
    if n < 2:
        return x * mask
    mean = (x * mask).sum() / n
    var = (((x - mean) * mask) ** 2).sum() / (n - 1)
    return (x - mean) * torch.rsqrt(var + eps) * mask


# =============================================================================================
# losses: each is a sum over the micro-batch's policy tokens divided by the minibatch's token
# count, so accumulated micro-batches give exactly the minibatch's token mean
# =============================================================================================


def policy_loss(logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor,
                mask: torch.Tensor, clip_low: float, clip_high: float, n_tokens: int
                ) -> tuple[torch.Tensor, dict[str, float]]:
    log_ratio = (logp - old_logp) * mask
    ratio = log_ratio.exp()
    unclipped = -adv * ratio
    clipped = -adv * ratio.clamp(1.0 - clip_low, 1.0 + clip_high)
    loss = (torch.max(unclipped, clipped) * mask).sum() / n_tokens
    with torch.no_grad():
        active = (clipped > unclipped).float() * mask
        approx_kl = ((ratio - 1.0) - log_ratio) * mask  # k3 estimator of KL(old || new)
        stats = {"clip_sum": float(active.sum()), "approx_kl_sum": float(approx_kl.sum()),
                 "ratio_dev_max": float(((ratio - 1.0).abs() * mask).max())}
    return loss, stats


def value_loss(values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor,
               mask: torch.Tensor, clip: float, n_tokens: int) -> torch.Tensor:
    err = (values - returns) ** 2
    if clip > 0:
        clipped = old_values + (values - old_values).clamp(-clip, clip)
        err = torch.max(err, (clipped - returns) ** 2)
    return 0.5 * (err * mask).sum() / n_tokens


def kl_to_reference(logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor,
                    n_tokens: int) -> torch.Tensor:
    """k3 estimator of KL(policy || reference): non-negative, unbiased, 0 when they agree."""
    d = (ref_logp - logp) * mask
    return ((d.exp() - d - 1.0) * mask).sum() / n_tokens


# =============================================================================================
# one PPO update over a scored batch
# =============================================================================================


def ppo_update(policy: Policy, optimizer: torch.optim.Optimizer, batch: Batch, scores: Scores,
               adv: torch.Tensor, returns: torch.Tensor | None, config: TrainConfig
               ) -> dict[str, float | None]:
    """Metrics that do not apply (no critic, no reference) are None."""
    params = policy.trainable_parameters()
    sums: dict[str, float] = {"tokens": 0.0, "pg": 0.0, "vf": 0.0, "kl": 0.0, "ent": 0.0,
                              "clip_sum": 0.0, "approx_kl_sum": 0.0, "grad_norm": 0.0}
    first_ratio_dev, steps = None, 0
    mb_size = config.minibatch_size or len(batch.trajectories)
    for _ in range(config.update_epochs):
        perm = torch.randperm(len(batch.trajectories), device=batch.input_ids.device)
        for mb in perm.split(mb_size):
            n_tok = int(batch.policy_mask[mb].sum().item())
            if n_tok == 0:
                continue
            optimizer.zero_grad(set_to_none=True)
            for rows in mb.split(config.micro_batch_size):
                ids, attn, w = micro_slice(batch, rows)
                mask = batch.policy_mask[rows, :w - 1]
                if mask.sum() == 0:
                    continue
                out = token_logprobs(policy, ids, attn, config.temperature,
                                     with_values=config.critic, with_entropy=True)
                pg, st = policy_loss(out.logprobs, scores.logprobs[rows, :w - 1],
                                     adv[rows, :w - 1], mask, config.clip_low, config.clip_high,
                                     n_tok)
                if first_ratio_dev is None:
                    first_ratio_dev = st["ratio_dev_max"]
                assert out.entropy is not None
                ent = (out.entropy * mask).sum() / n_tok
                loss = pg - config.ent_coef * ent
                if config.critic:
                    assert out.values is not None and scores.values is not None
                    assert returns is not None
                    vf = value_loss(out.values[:, :w - 1], scores.values[rows, :w - 1],
                                    returns[rows, :w - 1], mask, config.vf_clip, n_tok)
                    loss = loss + config.vf_coef * vf
                    sums["vf"] += float(vf.detach()) * n_tok
                if scores.ref_logprobs is not None:
                    kl = kl_to_reference(out.logprobs, scores.ref_logprobs[rows, :w - 1], mask,
                                         n_tok)
                    if config.kl_coef > 0:
                        loss = loss + config.kl_coef * kl
                    sums["kl"] += float(kl.detach()) * n_tok
                loss.backward()
                sums["pg"] += float(pg.detach()) * n_tok
                sums["ent"] += float(ent.detach()) * n_tok
                sums["clip_sum"] += st["clip_sum"]
                sums["approx_kl_sum"] += st["approx_kl_sum"]
            sums["tokens"] += n_tok
            grad_norm = torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm)
            sums["grad_norm"] += float(grad_norm)
            optimizer.step()
            steps += 1
    tok = max(sums["tokens"], 1.0)
    return {
        "losses/policy_loss": sums["pg"] / tok,
        "losses/value_loss": sums["vf"] / tok if config.critic else None,
        "losses/kl": sums["kl"] / tok if scores.ref_logprobs is not None else None,
        "losses/entropy": sums["ent"] / tok,
        "losses/clip_fraction": sums["clip_sum"] / tok,
        "losses/approx_kl": sums["approx_kl_sum"] / tok,
        "losses/grad_norm": sums["grad_norm"] / max(steps, 1),
        "losses/first_ratio_dev": first_ratio_dev if first_ratio_dev is not None else 0.0,
        "losses/optimizer_steps": float(steps),
    }


def explained_variance(values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor
                       ) -> float | None:
    idx = mask.bool()
    if idx.sum() < 2:
        return None
    y, v = returns[idx], values[idx]
    var = y.var()
    return None if var == 0 else float(1.0 - (y - v).var() / var)


# =============================================================================================
# the training loop
# =============================================================================================


def env_kwargs(config: TrainConfig, run_dir: Path) -> dict[str, Any]:
    kwargs = config.env_kwargs_dict()
    if config.suite and config.env_id == SWE_ENV_ID:
        # a suite path holds for workers whose working folder differs (Ray workers)
        suite = Path(config.suite)
        kwargs.setdefault("suite", str(suite.resolve()) if suite.exists() else config.suite)
    if config.record_env:
        kwargs.setdefault("record_dir", str(run_dir.resolve() / "records"))
    if config.env_id == SWE_ENV_ID:  # the curriculum: statistics kept with the run
        kwargs.setdefault("stats", str(stats_path(config, run_dir).resolve()))
        kwargs.setdefault("sampler", config.sampler)
        if config.failure_starts:
            kwargs.setdefault("failure_starts", config.failure_starts)
    return kwargs


def make_env(config: TrainConfig, run_dir: Path) -> gym.Env[Any, Any]:
    return gym.make(config.env_id, **env_kwargs(config, run_dir))


def make_fleet(config: TrainConfig, run_dir: Path) -> Any:
    """The environments as Ray workers on the cluster's Docker nodes (``--ray``)."""
    # "module:id" makes the workers import the module that registers the id (Gymnasium's form)
    entry = gym.spec(config.env_id).entry_point
    module = entry.split(":", 1)[0] if isinstance(entry, str) else ""
    env_id = f"{module}:{config.env_id}" if module and ":" not in config.env_id else config.env_id
    return Fleet(FleetConfig(env_id=env_id, env_kwargs=env_kwargs(config, run_dir),
                             num_envs=config.num_envs, envs_per_worker=config.envs_per_worker,
                             address=config.ray, needs_docker=config.env_id == SWE_ENV_ID))


def episode_jobs(config: TrainConfig, update: int,
                 draws: GroupDraws | None = None) -> list[EpisodeJob]:
    """Seeds per group: every sample of a group resets with the same seed, so the same task;
    with a curriculum, with the same draw (task and start) as well."""
    rng = np.random.default_rng([config.seed, update])
    groups = config.episodes_per_update // config.group_size
    seeds = rng.integers(0, 2**31 - 1, size=groups)
    options = draws.options(update, groups) if draws is not None else [None] * groups
    return [EpisodeJob(index=g * config.group_size + k, seed=int(seeds[g]), group=g,
                       options=options[g])
            for g in range(groups) for k in range(config.group_size)]


def train(config: TrainConfig,
          on_update: Callable[[dict[str, Any]], None] | None = None,
          on_start: Callable[[], None] | None = None) -> TrainResult:
    """Runs the configured updates; `on_start` is called once the set-up is done (a bad model
    or environment raises before it), `on_update` sees each update's metrics (for progress)."""
    run_dir = Path(config.out)
    device = resolve_device(config.device)
    random.seed(config.seed)
    np.random.seed(config.seed)
    torch.manual_seed(config.seed)

    # ---- setup: policy, generator, environments, optimiser --------------------------------
    resume = find_checkpoint(config.resume) if config.resume else None
    policy, tokenizer = load_policy(config, device, resume)
    generator = HFGenerator(policy.lm, tokenizer, config.temperature,
                            config.generation_batch_size)
    chat = ChatFormat(tokenizer, config.system_prompt)
    limits = Limits(config.max_turns, config.max_new_tokens, config.max_context)
    optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=config.lr,
                                  weight_decay=config.weight_decay)
    start = restore_trainer(resume, policy, optimizer) if resume is not None else 0
    logger = RunLogger(run_dir, config)
    result = TrainResult(run_dir)
    envs: list[gym.Env[Any, Any]] = []
    fleet = None
    pool = ThreadPoolExecutor(max_workers=config.num_envs, thread_name_prefix="repogym-env")
    try:
        if config.ray:  # the learner stays here; environments run on the cluster's workers
            fleet = make_fleet(config, run_dir)
            logger.write_json("cluster.json", fleet.workers())  # which node and engine is which
        for _ in range(config.num_envs if fleet is None else 0):  # one by one, so a failure
            envs.append(make_env(config, run_dir))                # closes those made
        draws = GroupDraws(config, env_kwargs(config, run_dir)) \
            if config.env_id == SWE_ENV_ID else None
        if on_start is not None:
            on_start()
        for update in range(start, config.updates):
            # ---- 1. rollouts ----------------------------------------------------------------
            jobs = episode_jobs(config, update, draws)
            if config.fork_at:  # every sample of a group starts from one shared prefix
                rollout = collect_forked(envs, generator, chat, jobs, limits, pool,
                                         config.fork_at)
            else:
                rollout = collect_rollouts(fleet if fleet is not None else envs, generator,
                                           chat, jobs, limits, pool,
                                           retries=config.episode_retries)
            logger.trajectories(update, rollout.trajectories)
            logger.lost(update, rollout.lost)
            metrics = rollout_metrics(rollout.trajectories)
            metrics.update(cluster_metrics(rollout, fleet))
            metrics.update(curriculum_metrics(rollout.trajectories,
                                              draws.store if draws is not None else None))
            t_update = time.perf_counter()
            batch = make_batch(rollout.trajectories, int(tokenizer.pad_token_id),
                               config.bootstrap, device)
            if batch is not None and batch.n_policy_tokens > 0:
                # ---- 2. scoring: old log-probs, values, reference log-probs ---------------
                scores = score_batch(policy, batch, config)
                # ---- 3. advantages --------------------------------------------------------
                returns = None
                if config.critic:
                    assert scores.values is not None
                    adv, returns = compute_gae(batch, scores.values, config.gamma, config.lam)
                    ev = explained_variance(scores.values[:, :-1], returns, batch.policy_mask)
                    metrics["losses/explained_variance"] = ev
                else:
                    adv = group_advantages(batch, config.advantage)
                if config.whiten_advantages:
                    adv = whiten(adv, batch.policy_mask)
                # ---- 4. optimise ----------------------------------------------------------
                metrics.update(ppo_update(policy, optimizer, batch, scores, adv, returns,
                                          config))
                generator.sync_weights()
                metrics["charts/learned_tokens"] = float(batch.n_policy_tokens)
            # ---- 5. log and checkpoint ------------------------------------------------------
            update_s = time.perf_counter() - t_update
            metrics.update(perf_metrics(rollout, update_s, batch, device))
            logger.metrics(update, metrics)
            result.metrics.append({"update": update, **metrics})
            if on_update is not None:
                on_update(result.metrics[-1])
            last = update == config.updates - 1
            if last or (config.save_every and (update + 1) % config.save_every == 0):
                result.checkpoint = save_checkpoint(run_dir, update + 1, policy, tokenizer,
                                                    optimizer)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        for env in envs:
            env.close()
        if fleet is not None:
            fleet.close()
        logger.close()
    return result


def rollout_metrics(trajs: list[Trajectory]) -> dict[str, float | None]:
    n = max(len(trajs), 1)
    return {
        "charts/reward": sum(t.reward for t in trajs) / n,
        "charts/resolved_rate": sum(t.resolved for t in trajs) / n,
        "charts/cut_fraction": sum(bool(t.cut) for t in trajs) / n,
        "charts/episode_turns": sum(len(t.turns) for t in trajs) / n,
        "charts/episode_tokens": sum(len(t.tokens) for t in trajs) / n,
        "charts/episodes": float(len(trajs)),
    }


def cluster_metrics(rollout: Rollout, fleet: Any) -> dict[str, float | None]:
    """Lost episodes (masked, never scored) and episodes per second on each node."""
    metrics: dict[str, float | None] = {
        "charts/episodes_lost": float(len(rollout.lost)),
        "charts/episodes_retried": float(sum(lost.retried for lost in rollout.lost)),
        "perf/env_wait_fraction": rollout.env_wait_seconds / max(rollout.wall_seconds, 1e-9),
    }
    per_node: dict[str, int] = {}
    for t in rollout.trajectories:
        per_node[t.where] = per_node.get(t.where, 0) + 1
    for where, n in sorted(per_node.items()):
        metrics[f"perf/node/{where}/episodes_per_s"] = n / max(rollout.wall_seconds, 1e-9)
    if fleet is not None:
        workers = fleet.workers()
        metrics["cluster/workers"] = float(sum(w["state"] == "ready" for w in workers))
        metrics["cluster/workers_lost"] = float(fleet.stats["workers_lost"])
    return metrics


def perf_metrics(rollout: Any, update_s: float, batch: Batch | None,
                 device: torch.device) -> dict[str, float | None]:
    train_tokens = float(batch.input_ids.numel()) if batch is not None else 0.0
    if device.type == "cuda":
        peak = torch.cuda.max_memory_allocated(device) / 2**30
    else:  # ru_maxrss is in KiB on Linux
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    return {
        "perf/env_s": rollout.env_seconds,
        "perf/env_wait_s": rollout.env_wait_seconds,
        "perf/generation_s": rollout.generation_seconds,
        "perf/rollout_s": rollout.wall_seconds,
        "perf/update_s": update_s,
        "perf/tokens_per_s": rollout.generated_tokens / max(rollout.generation_seconds, 1e-9),
        "perf/train_tokens_per_s": train_tokens / max(update_s, 1e-9),
        "perf/peak_memory_gb": peak,
    }
