"""Training with TRL's GRPO trainer against repogym: a ``rollout_func`` for multi-turn episodes.

TRL's ``GRPOTrainer(rollout_func=...)`` hands the function a batch of prompts and expects, per
prompt, the prompt's token ids, the completion's token ids and their sampling logprobs; extra
fields go to the reward functions, and ``env_mask`` marks which completion tokens the model
sampled (1) and which the environment wrote (0, left out of the loss). Here a prompt is a task
id; each rollout is one episode in ``repogym/SWE-v0``:

- the prompt is the task prompt (chat-templated, with the tool schemas);
- the completion is every turn after it: the model's sampled ids exactly as sampled (mask 1),
  then the observation framed as the next chat turn (mask 0), and so on;
- the reward is the episode's graded reward; an episode that reaches ``max_turns`` without
  submitting is submitted as it stands (``submit_at_end``) so that it is graded.

With a curriculum (``RolloutConfig(sampler="band:0.1-0.9")``, see docs/curricula.md) the
prompts only name groups: TRL repeats each dataset row ``num_generations`` times, and each
distinct prompt of a batch gets one draw of the sampler (a task, and with ``failure=P`` maybe a
kept failure to start from) that all its copies play. ``task_dataset(suite, sampled=N)`` makes
N such rows. A failure start's prefix opens the prompt as earlier chat turns.

Example (a real model on a GPU works the same way)::

    from trl import GRPOConfig, GRPOTrainer
    from repogym.agents.trl_rollout import RepogymRollout, RolloutConfig, env_reward, task_dataset

    rollout = RepogymRollout(RolloutConfig(suite="demo", max_turns=10, max_new_tokens=512))
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=env_reward,
                          args=GRPOConfig(num_generations=4, ...), rollout_func=rollout,
                          train_dataset=task_dataset("demo", split="train"))
    trainer.train()
    rollout.close()
"""

from __future__ import annotations

import copy
import random
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import torch

import repogym  # noqa: F401 - registers the environment
from repogym.agents.llm import SYSTEM_PROMPT
from repogym.agents.ppo.chat import ChatFormat
from repogym.envs.curriculum import check, parse
from repogym.envs.curriculum.draws import draw
from repogym.envs.curriculum.stats import store_for
from repogym.suite import load_suite


@dataclass(frozen=True)
class RolloutConfig:
    """Episodes of one rollout batch."""

    suite: str = "demo"  # a built-in suite name, a .jsonl file or a suite folder
    split: str | None = None  # None: the environment's default, the suite's train split
    max_turns: int = 10  # model turns per episode
    max_new_tokens: int = 512  # per turn
    max_context: int = 16_384  # prompt + completion tokens per episode
    temperature: float = 1.0
    submit_at_end: bool = True  # grade an episode that used up max_turns as it stands
    system_prompt: str = SYSTEM_PROMPT
    env_kwargs: dict[str, Any] = field(default_factory=dict)  # more gym.make arguments
    sampler: str = ""  # a curriculum (band:0.1-0.9, ...): prompts name groups, not tasks
    stats: str | None = None  # the task statistics file (None: this process's, in memory)
    failure_starts: int = 0  # keep a snapshot K turns before the end of each failed episode
    seed: int = 0  # of the curriculum's draws

    def __post_init__(self) -> None:
        if self.sampler:
            parse(self.sampler)  # a bad spec fails now, naming the valid ones
        if min(self.max_turns, self.max_new_tokens) < 1 or self.max_context < 2:
            raise ValueError(f"max_turns={self.max_turns}, max_new_tokens={self.max_new_tokens}"
                             f", max_context={self.max_context}: use positive budgets")
        if not self.temperature > 0:
            raise ValueError(f"temperature={self.temperature}: sampling needs a positive value")


def task_dataset(suite: str = "demo", split: str = "train", repeat: int = 1,
                 sampled: int = 0) -> Any:
    """A ``datasets.Dataset`` whose ``prompt`` column holds the task ids of ``split``, ``repeat``
    times over; with ``sampled=N``, N rows ``sample-I`` whose tasks a curriculum draws."""
    from datasets import Dataset  # here: datasets is slow to import and only TRL users need it

    if sampled:
        return Dataset.from_list([{"prompt": f"sample-{i}"} for i in range(sampled)])
    ids = [t.instance_id for t in load_suite(suite, split)]
    return Dataset.from_list([{"prompt": i} for i in ids * repeat])


def env_reward(completions: list[Any], reward: list[float], **_: Any) -> list[float]:
    """The reward function to pass to TRL: the environment's graded reward, as is."""
    return [float(r) for r in reward]


@dataclass
class _Episode:
    env: gym.Env[Any, Any]
    task_id: str
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    reward: float = 0.0
    resolved: bool = False
    turns: int = 0
    done: bool = False

    def add(self, ids: list[int], logprobs: list[float] | None) -> None:
        self.completion_ids += ids
        self.logprobs += logprobs if logprobs is not None else [0.0] * len(ids)
        self.env_mask += [1 if logprobs is not None else 0] * len(ids)


class RepogymRollout:
    """The ``rollout_func``: one repogym episode per prompt, environments kept between calls."""

    def __init__(self, config: RolloutConfig | None = None) -> None:
        self.config = config or RolloutConfig()
        self.envs: list[gym.Env[Any, Any]] = []
        self.pool: ThreadPoolExecutor | None = None
        self.curriculum = parse(self.config.sampler) if self.config.sampler else None
        self.task_stats = store_for(self.config.stats)
        self.tasks = (load_suite(self.config.suite, self.config.split or "train")
                      if self.curriculum is not None else [])
        if self.curriculum is not None:
            check(self.curriculum, self.tasks)
        self._rng = random.Random(self.config.seed)

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        tokenizer = trainer.processing_class
        model = trainer.accelerator.unwrap_model(trainer.model)
        chat = ChatFormat(tokenizer, self.config.system_prompt)
        pool = self._pool(len(prompts))
        options = self._options(prompts)
        episodes = [_Episode(env, _task_id(p)) for env, p in zip(self.envs, prompts, strict=False)]
        list(pool.map(lambda ep, o: self._reset(ep, chat, o), episodes, options))
        while live := [ep for ep in episodes if not ep.done]:
            outputs = generate(model, tokenizer, [ep.prompt_ids + ep.completion_ids for ep in live],
                               self._budgets(live), self.config.temperature)
            for ep, (ids, logprobs) in zip(live, outputs, strict=True):
                ep.add(ids, logprobs)
                ep.turns += 1
            texts = [tokenizer.decode(ids, skip_special_tokens=True) for ids, _ in outputs]
            list(pool.map(lambda ep, text: self._step(ep, text, chat), live, texts))
        return {"prompt_ids": [ep.prompt_ids for ep in episodes],
                "completion_ids": [ep.completion_ids for ep in episodes],
                "logprobs": [ep.logprobs for ep in episodes],
                "env_mask": [ep.env_mask for ep in episodes],
                "reward": [ep.reward for ep in episodes],
                "resolved": [ep.resolved for ep in episodes],
                "task_id": [ep.task_id for ep in episodes]}

    def _options(self, prompts: list[Any]) -> list[dict[str, Any]]:
        """Reset options per prompt: its task, or the curriculum's draw for its group."""
        if self.curriculum is None:
            return [{"task_id": _task_id(p)} for p in prompts]
        drawn: dict[str, dict[str, Any]] = {}
        for p in prompts:  # each distinct prompt is one group: one draw for all its copies
            key = repr(p)
            if key not in drawn:
                drawn[key] = draw(self.tasks, self.curriculum, self.task_stats,
                                  self._rng).options()
        return [drawn[repr(p)] for p in prompts]

    def _reset(self, ep: _Episode, chat: ChatFormat, options: dict[str, Any]) -> None:
        obs, info = ep.env.reset(options=options)
        ep.task_id = str(info["task_id"])
        if info.get("start") == "failure":  # the failed episode's turns open the prompt
            ep.prompt_ids = chat.continuation_ids(str(info["prompt"]), info.get("tools"),
                                                  info["prefix_turns"])
        else:
            ep.prompt_ids = chat.prompt_ids(str(obs), info.get("tools"))

    def _step(self, ep: _Episode, text: str, chat: ChatFormat) -> None:
        obs, reward, terminated, truncated, info = ep.env.step(text)
        room = self.config.max_context - len(ep.prompt_ids) - len(ep.completion_ids)
        if not (terminated or truncated) and (ep.turns >= self.config.max_turns or room < 2):
            if not self.config.submit_at_end:
                ep.done = True
                return
            obs, reward, terminated, truncated, info = ep.env.step({"tool": "submit"})
        if terminated or truncated:
            ep.reward, ep.resolved, ep.done = float(reward), bool(info.get("resolved")), True
            return
        ids = chat.observation_ids(str(obs), ep.completion_ids[-1])
        ep.add(ids[: max(0, room - 1)], None)

    def _budgets(self, live: list[_Episode]) -> list[int]:
        used = [len(ep.prompt_ids) + len(ep.completion_ids) for ep in live]
        return [max(1, min(self.config.max_new_tokens, self.config.max_context - u)) for u in used]

    def _pool(self, n: int) -> ThreadPoolExecutor:
        kwargs = {"suite": self.config.suite, "split": self.config.split,
                  "stats": self.config.stats, **self.config.env_kwargs}
        if self.curriculum is not None:
            kwargs.setdefault("sampler", self.config.sampler)
        if self.config.failure_starts:
            kwargs.setdefault("failure_starts", self.config.failure_starts)
        while len(self.envs) < n:
            self.envs.append(gym.make("repogym/SWE-v0", **kwargs))
        if self.pool is None or self.pool._max_workers < n:  # noqa: SLF001
            if self.pool is not None:
                self.pool.shutdown()
            self.pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="repogym-trl")
        return self.pool

    def close(self) -> None:
        for env in self.envs:
            env.close()
        self.envs = []
        if self.pool is not None:
            self.pool.shutdown()
            self.pool = None


@torch.no_grad()
def generate(model: Any, tokenizer: Any, prompts: list[list[int]], budgets: list[int],
             temperature: float) -> list[tuple[list[int], list[float]]]:
    """Samples a continuation per prompt (plain ancestral sampling) with each token's logprob;
    a continuation ends after the first EOS."""
    from transformers import GenerationConfig

    pad = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None
              else tokenizer.eos_token_id)
    eos = tokenizer.eos_token_id
    width = max(len(p) for p in prompts)
    device = next(model.parameters()).device
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, p in enumerate(prompts):  # left padding keeps every prompt's end in the last column
        ids[i, width - len(p):] = torch.tensor(p, dtype=torch.long)
        mask[i, width - len(p):] = 1
    config = GenerationConfig(do_sample=True, temperature=temperature, top_k=0, top_p=1.0,
                              max_new_tokens=max(budgets), eos_token_id=eos, pad_token_id=pad,
                              output_scores=True, return_dict_in_generate=True)
    was_training, saved = model.training, copy.deepcopy(model.generation_config)
    model.eval()
    model.generation_config = config  # the checkpoint's own sampling defaults stay out
    try:
        out = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device),
                             generation_config=config)
    finally:
        model.generation_config = saved
        model.train(was_training)
    scores = model.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)
    results = []
    for row, lps, budget in zip(out.sequences[:, width:].tolist(), scores.tolist(), budgets,
                                strict=True):
        n = min(budget, len(row))
        if eos in row[:n]:
            n = row.index(eos) + 1
        results.append((row[:n], [float(x) for x in lps[:n]]))
    return results


def _task_id(prompt: Any) -> str:
    if isinstance(prompt, list):  # a conversational prompt: the last message holds the id
        prompt = prompt[-1].get("content", "")
    return str(prompt).strip()
