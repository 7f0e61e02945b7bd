"""Sampling behind a small interface, so a faster engine (vLLM) can replace transformers later.

A generator returns the exact token ids it sampled; nothing downstream ever decodes and
re-tokenises them.
"""

from __future__ import annotations

import copy
from typing import Any, Protocol

import torch
from torch import nn


class Generator(Protocol):
    """Samples continuations of token-id prompts."""

    def generate(self, prompts: list[list[int]], max_new_tokens: list[int]) -> list[list[int]]:
        """One continuation per prompt, at most `max_new_tokens[i]` ids, ending at the first
        stop token (included) when one is sampled."""
        ...

    def sync_weights(self) -> None:
        """Called after every optimiser update; an engine holding its own copy reloads here."""
        ...


class HFGenerator:
    """Plain `model.generate` with the transformers KV cache, pure ancestral sampling."""

    def __init__(self, lm: nn.Module, tokenizer: Any, temperature: float,
                 batch_size: int = 0, stop_ids: set[int] | None = None) -> None:
        """`stop_ids` defaults to the tokenizer's and checkpoint's EOS ids; an empty set never
        stops early (benchmarks)."""
        from transformers import GenerationConfig

        self.lm: Any = lm  # a transformers model or peft wrapper: has .generate
        self.batch_size = batch_size
        self.stop_ids = stop_token_ids(lm, tokenizer) if stop_ids is None else set(stop_ids)
        self.pad_id = int(tokenizer.pad_token_id)
        # A clean config stands in for the checkpoint's own defaults (top_k=20,
        # repetition_penalty, ...) while sampling: any warping would make the sampling
        # distribution differ from the softmax the log-probs are computed with, and the PPO
        # ratio would be off from the start.
        self.config = GenerationConfig(
            do_sample=True, temperature=temperature, top_k=0, top_p=1.0, repetition_penalty=1.0,
            eos_token_id=sorted(self.stop_ids) or None, pad_token_id=self.pad_id,
        )

    def sync_weights(self) -> None:
        """The weights are shared with the learner, so there is nothing to copy."""

    @torch.no_grad()
    def generate(self, prompts: list[list[int]], max_new_tokens: list[int]) -> list[list[int]]:
        if len(prompts) != len(max_new_tokens):
            raise ValueError(f"{len(prompts)} prompts but {len(max_new_tokens)} token budgets")
        size = self.batch_size or len(prompts)
        out: list[list[int]] = []
        for start in range(0, len(prompts), size):
            out += self._generate(prompts[start:start + size], max_new_tokens[start:start + size])
        return out

    def _generate(self, prompts: list[list[int]], budgets: list[int]) -> list[list[int]]:
        device = next(self.lm.parameters()).device
        width = max(len(p) for p in prompts)
        # Left padding keeps every prompt's last token in the last column.
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, width - len(p):] = torch.tensor(p, dtype=torch.long)
            mask[i, width - len(p):] = 1
        config = copy.deepcopy(self.config)
        config.max_new_tokens = max(budgets)
        # transformers fills every unset field from the model's own generation config, so that
        # is swapped for the clean one too (and put back: checkpoints keep the original).
        base = _base_model(self.lm)
        was_training, original = self.lm.training, base.generation_config
        self.lm.eval()
        base.generation_config = copy.deepcopy(self.config)
        try:
            seqs = self.lm.generate(input_ids=ids.to(device), attention_mask=mask.to(device),
                                    generation_config=config)
        finally:
            base.generation_config = original
            self.lm.train(was_training)
        rows = [row[width:].tolist() for row in seqs]
        return [self._cut(row, budget) for row, budget in zip(rows, budgets, strict=True)]

    def _cut(self, new: list[int], budget: int) -> list[int]:
        new = new[:budget]
        for i, tok in enumerate(new):
            if tok in self.stop_ids:
                return new[:i + 1]
        return new


def stop_token_ids(lm: nn.Module, tokenizer: Any) -> set[int]:
    """The tokenizer's EOS plus the checkpoint's generation EOS ids (e.g. Qwen's <|im_end|>)."""
    ids: set[int] = set()
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    gen = getattr(_base_model(lm), "generation_config", None)
    eos = getattr(gen, "eos_token_id", None)
    if isinstance(eos, int):
        ids.add(eos)
    elif eos:
        ids.update(int(e) for e in eos)
    if not ids:
        raise ValueError("the tokenizer has no EOS token and the model no generation EOS: "
                         "give the tokenizer an eos_token")
    return ids


def _base_model(lm: nn.Module) -> Any:
    get_base = getattr(lm, "get_base_model", None)  # a peft wrapper
    return get_base() if callable(get_base) else lm
