"""Benchmark of the PPO agent's two costs: generation tokens/s and the time of one update.

    python -m repogym.scripts.bench_ppo --size 1.5b --device cuda
    python -m repogym.scripts.bench_ppo --model /models/Qwen2.5-7B-Instruct --lora-rank 64

A `--size` builds a random model with the shape of that Qwen2.5 size (no files needed); a
`--model` path loads a real checkpoint. Prints one JSON object: generation tokens/s, scoring
and update seconds, tokens/s of the update, and peak memory.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path
from typing import Any

import torch

from repogym.agents.ppo.config import TrainConfig
from repogym.agents.ppo.generation import HFGenerator
from repogym.agents.ppo.policy import (
    TINY_SIZE,
    dtype_kwarg,
    ensure_chat_template,
    make_policy,
    resolve_device,
    resolve_dtype,
)
from repogym.agents.ppo.ppo import compute_gae, make_batch, ppo_update, score_batch, whiten
from repogym.agents.ppo.rollout import EpisodeJob, Trajectory

# Shapes of the Qwen2.5 family (hidden, layers, heads, kv heads, MLP width).
SIZES: dict[str, dict[str, Any]] = {
    "tiny": TINY_SIZE,
    "0.5b": {"hidden_size": 896, "num_hidden_layers": 24, "num_attention_heads": 14,
             "num_key_value_heads": 2, "intermediate_size": 4864},
    "1.5b": {"hidden_size": 1536, "num_hidden_layers": 28, "num_attention_heads": 12,
             "num_key_value_heads": 2, "intermediate_size": 8960},
    "3b": {"hidden_size": 2048, "num_hidden_layers": 36, "num_attention_heads": 16,
           "num_key_value_heads": 2, "intermediate_size": 11008},
    "7b": {"hidden_size": 3584, "num_hidden_layers": 28, "num_attention_heads": 28,
           "num_key_value_heads": 4, "intermediate_size": 18944},
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", default="tiny", choices=sorted(SIZES), help="random model shape")
    p.add_argument("--model", default="", help="local checkpoint folder (overrides --size)")
    p.add_argument("--vocab", type=int, default=151936, help="vocabulary of a random model")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument("--lora-rank", type=int, default=0, help="0 trains every weight")
    p.add_argument("--batch", type=int, default=8, help="sequences generated / trained at once")
    p.add_argument("--prompt-len", type=int, default=512, help="prompt tokens per sequence")
    p.add_argument("--new-tokens", type=int, default=128, help="generated tokens per sequence")
    p.add_argument("--seq-len", type=int, default=2048, help="tokens per training sequence")
    p.add_argument("--micro-batch", type=int, default=1, help="sequences per forward/backward")
    p.add_argument("--out", default="", help="also write the JSON here")
    return p.parse_args(argv)


def build_lm(args: argparse.Namespace, device: torch.device, dtype: torch.dtype) -> Any:
    from transformers import AutoModelForCausalLM, AutoTokenizer, ByT5Tokenizer, Qwen2Config

    tok: Any
    lm: Any
    if args.model:
        tok = AutoTokenizer.from_pretrained(args.model, local_files_only=True)
        lm = AutoModelForCausalLM.from_pretrained(args.model, local_files_only=True,
                                                  **dtype_kwarg(dtype))
        ensure_chat_template(tok)
        return lm.to(device), tok
    tok = ByT5Tokenizer()
    ensure_chat_template(tok)
    vocab = len(tok) if args.size == "tiny" else args.vocab
    cfg = Qwen2Config(vocab_size=vocab, max_position_embeddings=max(args.seq_len, 4096),
                      tie_word_embeddings=args.size in ("tiny", "0.5b", "1.5b", "3b"),
                      pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                      **SIZES[args.size])
    with torch.device(device):
        lm = AutoModelForCausalLM.from_config(cfg, **dtype_kwarg(dtype))
    return lm, tok


def bench_generation(lm: Any, tok: Any, args: argparse.Namespace, vocab: int) -> dict[str, float]:
    # A random model would stop at random: measure full-length turns.
    gen = HFGenerator(lm, tok, temperature=1.0, stop_ids=set())
    prompts = torch.randint(3, vocab, (args.batch, args.prompt_len)).tolist()
    gen.generate([p[:16] for p in prompts], [4] * args.batch)  # warm-up
    _sync()
    t0 = time.perf_counter()
    out = gen.generate(prompts, [args.new_tokens] * args.batch)
    _sync()
    seconds = time.perf_counter() - t0
    tokens = sum(len(o) for o in out)
    return {"generation_s": seconds, "generated_tokens": float(tokens),
            "generation_tokens_per_s": tokens / seconds}


def bench_update(policy: Any, args: argparse.Namespace, config: TrainConfig, vocab: int,
                 device: torch.device) -> dict[str, float]:
    trajs = []
    for i in range(args.batch):
        t = Trajectory(EpisodeJob(i, i, i), terminated=True)
        half = args.seq_len // 2
        t.append(torch.randint(3, vocab, (half,)).tolist(), policy=False)
        t.append(torch.randint(3, vocab, (args.seq_len - half,)).tolist(), policy=True)
        t.rewards[-1] = float(i % 2)
        trajs.append(t)
    batch = make_batch(trajs, 0, bootstrap=True, device=device)
    assert batch is not None
    optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=1e-6)
    _sync()
    t0 = time.perf_counter()
    scores = score_batch(policy, batch, config)
    _sync()
    score_s = time.perf_counter() - t0
    assert scores.values is not None
    adv, returns = compute_gae(batch, scores.values, 1.0, 1.0)
    adv = whiten(adv, batch.policy_mask)
    t0 = time.perf_counter()
    ppo_update(policy, optimizer, batch, scores, adv, returns, config)
    _sync()
    update_s = time.perf_counter() - t0
    tokens = float(args.batch * args.seq_len)
    return {"score_s": score_s, "update_s": update_s,
            "update_tokens_per_s": tokens / (score_s + update_s)}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    device = resolve_device(args.device)
    dtype = resolve_dtype("auto", device)
    config = TrainConfig(model=args.model or "tiny", lora_rank=args.lora_rank,
                         micro_batch_size=args.micro_batch, max_context=args.seq_len + 1,
                         max_new_tokens=min(args.new_tokens, args.seq_len))
    lm, tok = build_lm(args, device, dtype)
    vocab = int(lm.get_input_embeddings().weight.shape[0])
    params = sum(p.numel() for p in lm.parameters())
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    policy = make_policy(lm, config, device)
    result: dict[str, Any] = {"model": args.model or f"random-{args.size}", "params": params,
                              "device": str(device), "dtype": str(dtype).replace("torch.", ""),
                              "lora_rank": args.lora_rank, "batch": args.batch,
                              "prompt_len": args.prompt_len, "new_tokens": args.new_tokens,
                              "seq_len": args.seq_len}
    result.update(bench_generation(policy.lm, tok, args, vocab))
    result.update(bench_update(policy, args, config, vocab, device))
    result["peak_memory_gb"] = _peak_memory_gb(device)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _peak_memory_gb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


if __name__ == "__main__":
    sys.exit(main())
