"""The policy: a transformers causal LM, optional LoRA, a zero-initialised value head.

`token_logprobs` is the single function that computes old, new and reference log-probs, so the
three can only differ by the weights they are computed with.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from repogym.agents.ppo.config import TrainConfig

# A minimal template for tokenizers that ship none (ByT5 in tests, base checkpoints). Tools are
# listed in the system turn as JSON, the way Qwen/Hermes templates do.
SIMPLE_CHAT_TEMPLATE = (
    "{% if tools %}<|system|>You can call these tools: {{ tools | tojson }}</s>{% endif %}"
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}</s>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)

TINY_SIZE: dict[str, Any] = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
             "num_attention_heads": 4, "num_key_value_heads": 2}


class Policy(nn.Module):
    """A causal LM plus an optional value head, and the frozen reference used for the KL."""

    def __init__(self, lm: nn.Module, value_head: nn.Linear | None, ref_lm: nn.Module | None,
                 lora: bool, gradient_checkpointing: bool) -> None:
        super().__init__()
        self.lm = lm
        self.value_head = value_head
        # Kept out of the module tree so it is never trained, saved or counted as a parameter.
        self._ref = [ref_lm] if ref_lm is not None else []
        self.lora = lora
        self.gradient_checkpointing = gradient_checkpointing

    @property
    def has_reference(self) -> bool:
        return self.lora or bool(self._ref)

    @contextmanager
    def reference(self) -> Iterator[nn.Module]:
        """The frozen reference: the base with the adapter disabled, or a frozen copy."""
        if self.lora:
            with self.lm.disable_adapter():  # type: ignore[operator]
                yield self.lm
        elif self._ref:
            yield self._ref[0]
        else:
            raise RuntimeError("this policy has no reference model: set kl_coef > 0 or use LoRA")

    def trainable_parameters(self) -> list[nn.Parameter]:
        return [p for p in self.parameters() if p.requires_grad]


@dataclass
class TokenScores:
    """Per-position outputs aligned with `input_ids[:, 1:]` (position t scores token t + 1)."""

    logprobs: torch.Tensor  # [B, L-1] float32
    entropy: torch.Tensor | None  # [B, L-1] float32
    values: torch.Tensor | None  # [B, L] float32: value of the state after reading token t


def token_logprobs(policy: Policy, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                   temperature: float, *, reference: bool = False, with_values: bool = False,
                   with_entropy: bool = False, chunk: int = 1024) -> TokenScores:
    """Log-probs of every next token under the policy (or its reference).

    Dropout is removed from the model at load time, so eval and train mode compute the same
    numbers; train mode is used only where gradient checkpointing needs it (transformers
    checkpoints layers only in training mode).
    """
    grad = torch.is_grad_enabled() and not reference
    if reference:
        with policy.reference() as lm:
            lm.eval()
            out = lm(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
        hidden = None
    else:
        policy.lm.train(grad and policy.gradient_checkpointing)
        out = policy.lm(input_ids=input_ids, attention_mask=attention_mask, use_cache=False,
                        output_hidden_states=with_values)
        hidden = out.hidden_states[-1] if with_values else None
    logp, entropy = _chunked_logprobs(out.logits[:, :-1], input_ids[:, 1:], temperature,
                                      with_entropy, chunk, grad)
    values = None
    if with_values:
        if policy.value_head is None or hidden is None:
            raise RuntimeError("values requested from a policy without a value head")
        values = policy.value_head(hidden.float()).squeeze(-1)
    return TokenScores(logp, entropy, values)


def _chunked_logprobs(logits: torch.Tensor, targets: torch.Tensor, temperature: float,
                      with_entropy: bool, chunk: int, grad: bool
                      ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """fp32 log-softmax in sequence chunks, so a long context never holds [L, vocab] in fp32."""
    logps, ents = [], []
    for start in range(0, logits.shape[1], chunk):
        args = (logits[:, start:start + chunk], targets[:, start:start + chunk])
        if grad:
            # Recompute the fp32 softmax in backward instead of keeping it alive.
            lp, ent = checkpoint(_logp_entropy, *args, temperature, use_reentrant=False)
        else:
            lp, ent = _logp_entropy(*args, temperature)
        logps.append(lp)
        ents.append(ent)
    entropy = torch.cat(ents, dim=1) if with_entropy else None
    return torch.cat(logps, dim=1), entropy


def _logp_entropy(logits: torch.Tensor, targets: torch.Tensor, temperature: float
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    logp_all = torch.log_softmax(logits.float() / temperature, dim=-1)
    logp = logp_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    entropy = -(logp_all.exp() * logp_all).sum(-1)
    return logp, entropy


# ---------------------------------------------------------------------------------------------
# loading
# ---------------------------------------------------------------------------------------------


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("device=cuda but torch sees no CUDA device; use --device cpu, or install "
                         "a CUDA build of torch on a GPU machine")
    return torch.device(name)


def resolve_dtype(name: str, device: torch.device) -> torch.dtype:
    if name == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return {"float32": torch.float32, "bfloat16": torch.bfloat16}[name]


def load_policy(config: TrainConfig, device: torch.device,
                checkpoint_dir: Path | None = None) -> tuple[Policy, Any]:
    """Builds the policy and tokenizer; `checkpoint_dir` restores trained weights from a run."""
    dtype = resolve_dtype(config.dtype, device)
    saved = checkpoint_dir / "model" if checkpoint_dir is not None else None
    full_from_checkpoint = saved is not None and config.lora_rank == 0
    lm, tokenizer = _load_lm(str(saved) if full_from_checkpoint else config.model, config, dtype)
    ensure_chat_template(tokenizer)
    ref = None
    if config.kl_coef > 0 and config.lora_rank == 0:
        # After a resume the reference is still the original model, not the checkpoint.
        ref = _load_lm(config.model, config, dtype)[0] if full_from_checkpoint \
            else copy.deepcopy(lm)
    return make_policy(lm, config, device, ref, None if full_from_checkpoint else saved), tokenizer


def make_policy(lm: nn.Module, config: TrainConfig, device: torch.device,
                ref_lm: nn.Module | None = None, adapter_dir: Path | None = None) -> Policy:
    """Wraps a loaded LM: dropout off, checkpointing, LoRA (new or from `adapter_dir`), value
    head, frozen reference."""
    disable_dropout(lm)
    if ref_lm is not None:
        disable_dropout(ref_lm)
        ref_lm.requires_grad_(False).eval().to(device)
    if config.gradient_checkpointing:
        _enable_checkpointing(lm)
    if config.lora_rank > 0:
        lm = _add_lora(lm, config, adapter_dir)
    value_head = None
    if config.critic:
        value_head = nn.Linear(_hidden_size(lm), 1, dtype=torch.float32)
        # Zero init: the untrained critic predicts 0 instead of noise that would swamp the
        # first advantages.
        nn.init.zeros_(value_head.weight)
        nn.init.zeros_(value_head.bias)
    policy = Policy(lm, value_head, ref_lm, config.lora_rank > 0, config.gradient_checkpointing)
    return policy.to(device)


def _load_lm(name: str, config: TrainConfig, dtype: torch.dtype) -> tuple[nn.Module, Any]:
    if name == "tiny":
        return tiny_model(config.seed, config.max_context, dtype)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not os.path.isdir(name):
        raise ValueError(f"model={name!r} is not a folder; models are never downloaded: pass the "
                         "local path of a checkpoint (config.json, weights, tokenizer) or 'tiny'")
    tokenizer = AutoTokenizer.from_pretrained(name, local_files_only=True)
    lm = AutoModelForCausalLM.from_pretrained(name, local_files_only=True, **dtype_kwarg(dtype))
    return lm, tokenizer


def tiny_model(seed: int, max_context: int = 4096, dtype: torch.dtype = torch.float32
               ) -> tuple[nn.Module, Any]:
    """A random two-layer Llama over ByT5's byte vocabulary, built in memory (no files)."""
    from transformers import AutoModelForCausalLM, ByT5Tokenizer, LlamaConfig

    tokenizer = ByT5Tokenizer()
    ensure_chat_template(tokenizer)
    cfg = LlamaConfig(vocab_size=len(tokenizer), max_position_embeddings=max(max_context, 2048),
                      pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                      bos_token_id=None, tie_word_embeddings=False, **TINY_SIZE)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # the same seed gives the same "pretrained" weights on resume
        lm = AutoModelForCausalLM.from_config(cfg)
    return lm.to(dtype), tokenizer


def ensure_chat_template(tokenizer: Any) -> None:
    if getattr(tokenizer, "chat_template", None) is None:
        tokenizer.chat_template = SIMPLE_CHAT_TEMPLATE
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token


_DROPOUT_ATTRS = ("attention_dropout", "attn_dropout", "hidden_dropout", "resid_pdrop",
                  "attn_pdrop", "embd_pdrop", "dropout", "dropout_p")


def disable_dropout(model: nn.Module) -> None:
    """Dropout off everywhere, so old, new and reference log-probs agree before an update.

    Attention layers keep their rate as a float attribute (read only in training mode), so
    those are zeroed as well as every `nn.Dropout` and the config.
    """
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.0
        for name in _DROPOUT_ATTRS:
            if isinstance(getattr(module, name, None), float):
                setattr(module, name, 0.0)
    cfg = getattr(model, "config", None)
    for name in _DROPOUT_ATTRS:
        if cfg is not None and isinstance(getattr(cfg, name, None), float):
            setattr(cfg, name, 0.0)


def _enable_checkpointing(lm: Any) -> None:
    kwargs = {"use_reentrant": False}
    if hasattr(lm, "activation_checkpointing_enable"):  # transformers >= 5
        lm.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        lm.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def _add_lora(lm: nn.Module, config: TrainConfig, saved: Path | None) -> nn.Module:
    from peft import LoraConfig, PeftModel, get_peft_model

    if saved is not None:
        return PeftModel.from_pretrained(lm, str(saved), is_trainable=True)
    targets: str | list[str] = config.lora_targets
    if config.lora_targets != "all-linear":
        targets = [t.strip() for t in config.lora_targets.split(",") if t.strip()]
    # peft annotates lora_alpha as int but only divides by it: a fractional alpha is kept
    lora = LoraConfig(r=config.lora_rank, lora_alpha=config.lora_alpha,  # type: ignore[arg-type]
                      lora_dropout=0.0, target_modules=targets, task_type="CAUSAL_LM")
    return get_peft_model(lm, lora)  # type: ignore[arg-type]


def _hidden_size(lm: Any) -> int:
    cfg = lm.config
    if hasattr(cfg, "get_text_config"):
        cfg = cfg.get_text_config()
    return int(cfg.hidden_size)


def dtype_kwarg(dtype: torch.dtype) -> dict[str, torch.dtype]:
    import transformers

    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    # `torch_dtype` was renamed `dtype` in 4.56.
    return {"dtype": dtype} if (major, minor) >= (4, 56) else {"torch_dtype": dtype}
