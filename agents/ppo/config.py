"""The one configuration of the PPO agent.

Every field carries a line of help in its metadata; `repogym train` turns the fields into flags
(`lr` becomes `--lr`, `clip_low` becomes `--clip-low`), so the command line and the Python API
are the same object. This module does not import torch, so `repogym --help` stays fast.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from repogym.envs.curriculum import parse as parse_sampler

ADVANTAGES = ("gae", "grpo", "rloo")
TRUNCATIONS = ("auto", "mask", "bootstrap")
DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("auto", "float32", "bfloat16")


def _f(default: Any, help: str, choices: tuple[str, ...] | None = None) -> Any:
    meta: dict[str, Any] = {"help": help}
    if choices:
        meta["choices"] = choices
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class TrainConfig:
    """Everything a PPO run needs; saved as `<out>/config.json`, which alone reproduces the run."""

    # --- run ---
    out: str = _f("runs/ppo", "run folder: metrics.jsonl, tb/, checkpoints/, trajectories.jsonl")
    seed: int = _f(0, "seed for torch, task sampling and the tiny model's weights")
    updates: int = _f(100, "number of PPO updates (rollout + optimisation) to run in total")
    device: str = _f("auto", "where the policy runs; auto picks cuda when available", DEVICES)
    dtype: str = _f("auto", "weight dtype; auto is bfloat16 on cuda, float32 on cpu", DTYPES)
    save_every: int = _f(10, "write a checkpoint every N updates (the last update always saves)")
    resume: str = _f("", "run folder or checkpoint folder to continue from; empty starts fresh")
    tensorboard: bool = _f(True, "also write TensorBoard event files under <out>/tb")

    # --- environment ---
    env_id: str = _f("repogym/SWE-v0", "Gymnasium id of the environment (str observations/actions)")
    suite: str = _f("demo", "task suite passed to the environment as suite=...; empty passes none")
    env_kwargs: str = _f("{}", "extra keyword arguments for gym.make, as a JSON object")
    num_envs: int = _f(4, "environments stepped at once in a worker pool (overlaps generation)")
    record_env: bool = _f(True, "pass record_dir=<out>/records so the env writes its own records")
    ray: str = _f("", "run the environments on Ray workers on the nodes that offer the 'docker' "
                      "resource: auto joins the running cluster, local starts one here, or "
                      "HOST:PORT; empty runs them in this process")
    envs_per_worker: int = _f(4, "with --ray: environments per worker process")
    episode_retries: int = _f(1, "times an episode lost with its worker, node or engine runs "
                                 "again elsewhere (lost attempts are masked, never scored)")

    # --- policy ---
    model: str = _f("tiny", "local path of a transformers causal LM, or 'tiny' (random, in memory)")
    lora_rank: int = _f(0, "LoRA rank through peft; 0 trains every weight")
    lora_alpha: float = _f(32.0, "LoRA alpha (scale is alpha / rank)")
    lora_targets: str = _f("all-linear", "comma-separated module names for LoRA, or 'all-linear'")
    gradient_checkpointing: bool = _f(True, "recompute activations in the backward pass")
    system_prompt: str = _f("", "optional system message put before the task prompt")

    # --- curriculum ---
    sampler: str = _f("uniform", "how each group's task is drawn: uniform, band:0.1-0.9 (recent "
                                 "success rate in the band), difficulty:PACE (easy to hard), "
                                 "weights:FILE.json; add ,failure=P to start a share of groups "
                                 "from kept failures (docs/curricula.md)")
    stats: str = _f("", "task statistics file, read when it exists (a resumed run keeps its "
                        "curriculum); empty: <out>/task_stats.json")
    failure_starts: int = _f(0, "keep a snapshot K turns before the end of each failed episode, "
                                "for failure starts; 0 keeps none")

    # --- rollouts ---
    episodes_per_update: int = _f(8, "episodes collected per update (tasks x group_size)")
    group_size: int = _f(1, "samples per task; grpo and rloo need at least 2")
    fork_at: int = _f(
        0,
        "draw each group from a shared prefix: play its first K turns once, snapshot the env "
        "there and start every sample of the group from the snapshot; 0 starts them all from "
        "the task's start",
    )
    max_turns: int = _f(10, "cap on policy turns per episode; a capped episode counts as cut")
    max_new_tokens: int = _f(256, "cap on tokens the policy generates in one turn")
    max_context: int = _f(8192, "cap on the whole episode's tokens (prompt, turns, observations)")
    temperature: float = _f(1.0, "sampling temperature (log-probs use the same temperature)")
    generation_batch_size: int = _f(0, "largest batch passed to the generator; 0 means no limit")
    truncation: str = _f(
        "auto",
        "what a cut episode contributes: mask it out, or bootstrap from the value "
        "(auto: bootstrap with gae, mask without a critic)",
        TRUNCATIONS,
    )

    # --- learning ---
    advantage: str = _f("gae", "gae (critic) or the critic-free grpo / rloo", ADVANTAGES)
    gamma: float = _f(1.0, "discount per policy token")
    lam: float = _f(1.0, "GAE lambda")
    whiten_advantages: bool = _f(True, "normalise advantages over the batch's policy tokens")
    lr: float = _f(1e-5, "AdamW learning rate")
    weight_decay: float = _f(0.0, "AdamW weight decay")
    update_epochs: int = _f(1, "passes over each rollout batch")
    minibatch_size: int = _f(0, "episodes per optimiser step; 0 means the whole batch")
    micro_batch_size: int = _f(2, "episodes per forward/backward (gradients accumulate)")
    clip_low: float = _f(0.2, "ratio clip below 1 (ratio >= 1 - clip_low)")
    clip_high: float = _f(0.28, "ratio clip above 1 (ratio <= 1 + clip_high)")
    vf_clip: float = _f(0.2, "value clip around the rollout's value; 0 disables it")
    vf_coef: float = _f(0.5, "weight of the value loss")
    kl_coef: float = _f(0.0, "weight of the KL to the frozen reference; 0 allowed")
    ent_coef: float = _f(0.0, "weight of the entropy bonus")
    max_grad_norm: float = _f(1.0, "gradient clipping norm")

    def __post_init__(self) -> None:
        for name in ("updates", "num_envs", "episodes_per_update", "group_size", "max_turns",
                     "max_new_tokens", "max_context", "update_epochs", "micro_batch_size",
                     "envs_per_worker"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("save_every", "lora_rank", "minibatch_size", "generation_batch_size",
                     "fork_at", "episode_retries", "failure_starts"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        for name, choices in (("advantage", ADVANTAGES), ("truncation", TRUNCATIONS),
                              ("device", DEVICES), ("dtype", DTYPES)):
            if getattr(self, name) not in choices:
                raise ValueError(f"{name}={getattr(self, name)!r}; choose one of {choices}")
        if self.episodes_per_update % self.group_size:
            raise ValueError(
                f"episodes_per_update={self.episodes_per_update} is not a multiple of "
                f"group_size={self.group_size}; change one of them"
            )
        if self.advantage != "gae" and self.group_size < 2:
            raise ValueError(f"advantage={self.advantage} compares samples of one task: "
                             f"set group_size >= 2 (got {self.group_size})")
        if self.fork_at and self.group_size < 2:
            raise ValueError(f"fork_at={self.fork_at} shares a prefix among the samples of a "
                             f"group: set group_size >= 2 (got {self.group_size})")
        if self.fork_at and self.ray:
            raise ValueError(f"fork_at={self.fork_at} branches from snapshots held by this "
                             "process's environments: drop --ray, or --fork-at")
        if self.ray and self.ray not in ("auto", "local") and ":" not in self.ray:
            raise ValueError(f"ray={self.ray!r}: use auto, local or HOST:PORT")
        if self.advantage != "gae" and self.truncation == "bootstrap":
            raise ValueError(f"advantage={self.advantage} has no critic to bootstrap from: "
                             "use truncation=mask or advantage=gae")
        if self.max_new_tokens >= self.max_context:
            raise ValueError(f"max_new_tokens={self.max_new_tokens} must be below "
                             f"max_context={self.max_context}")
        if not (0.0 <= self.gamma <= 1.0 and 0.0 <= self.lam <= 1.0):
            raise ValueError(f"gamma={self.gamma} and lam={self.lam} must lie in [0, 1]")
        for name in ("lr", "temperature", "clip_low", "clip_high", "max_grad_norm"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.clip_low >= 1.0:
            raise ValueError(f"clip_low={self.clip_low} must be below 1")
        for name in ("vf_clip", "vf_coef", "kl_coef", "ent_coef", "weight_decay"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if not self.model:
            raise ValueError("model is empty: give a local model folder or 'tiny'")
        curriculum = parse_sampler(self.sampler)  # a bad spec fails now, naming the valid ones
        if not curriculum.uniform and self.env_id != "repogym/SWE-v0":
            raise ValueError(f"sampler={self.sampler!r} draws from a suite's tasks: it needs "
                             "--env-id repogym/SWE-v0 (or --sampler uniform)")
        if curriculum.failure and not self.failure_starts:
            raise ValueError(f"sampler={self.sampler!r} starts groups from kept failures: set "
                             "--failure-starts K so that failed episodes are kept")
        self.env_kwargs_dict()  # fail now, not after the model has loaded

    @property
    def critic(self) -> bool:
        """Whether a value head is trained (only GAE needs one)."""
        return self.advantage == "gae"

    @property
    def bootstrap(self) -> bool:
        """Whether cut episodes bootstrap from the value instead of being masked out."""
        if self.truncation == "auto":
            return self.critic
        return self.truncation == "bootstrap"

    def env_kwargs_dict(self) -> dict[str, Any]:
        try:
            value = json.loads(self.env_kwargs)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"env_kwargs is not JSON ({exc}); pass e.g. '{{\"split\": \"train\"}}'"
            ) from exc
        if not isinstance(value, dict):
            raise ValueError(f"env_kwargs must be a JSON object, got {self.env_kwargs!r}")
        return value

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
