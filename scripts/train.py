"""`repogym train`: the bundled multi-turn PPO agent.

Every field of `TrainConfig` is a flag (`--clip-low 0.2`, `--no-tensorboard`), so the command
line and the Python API are the same object. Torch is imported only when the command runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any, get_type_hints

from repogym.agents.ppo.config import TrainConfig

EXAMPLES = """examples:
  repogym train --suite demo --model tiny --updates 2
  repogym train --suite demo --model /models/Qwen2.5-7B-Instruct --device cuda \\
      --lora-rank 64 --lr 1e-5 --max-context 32768 --max-new-tokens 1024 --out runs/qwen7b
  repogym train --env-id repogym/ToyText-v0 --suite '' --max-turns 2 --max-new-tokens 8 \\
      --lr 1e-2 --episodes-per-update 16 --num-envs 16 --updates 30
"""


def add_train_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Adds `train` to a subparsers object; the parser's `func` default is `run_train`."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "train", help="train an LLM agent with multi-turn PPO",
        description="Train a transformers causal LM on a repogym environment with multi-turn "
                    "PPO (or GRPO / RLOO). Writes metrics.jsonl, TensorBoard events, "
                    "trajectories and checkpoints under --out.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    hints = get_type_hints(TrainConfig)
    for f in dataclasses.fields(TrainConfig):
        flag = "--" + f.name.replace("_", "-")
        kind = hints[f.name]
        help_text = f"{f.metadata['help']} (default: {f.default!r})"
        if kind is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default,
                                help=help_text)
        else:
            parser.add_argument(flag, type=kind, default=f.default, help=help_text,
                                choices=f.metadata.get("choices"), dest=f.name)
    parser.set_defaults(func=run_train)
    return parser


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(TrainConfig)}
    return TrainConfig(**values)


def run_train(args: argparse.Namespace) -> int:
    """Runs training; prints a summary line per update and a final JSON summary."""
    config = config_from_args(args)  # a bad value raises ValueError: the command line says
    from repogym.agents.ppo.ppo import train  # torch, transformers: not for `train --help`

    def started() -> None:  # once the model loaded and the environments exist
        print(f"repogym train: {config.updates} updates of {config.episodes_per_update} "
              f"episodes on {config.env_id}, model {config.model}, run folder {config.out}",
              flush=True)

    result = train(config, on_update=lambda m: print(_summary_line(m), flush=True),
                   on_start=started)
    summary = {
        "run_dir": str(result.run_dir),
        "updates": len(result.metrics),
        "checkpoint": str(result.checkpoint) if result.checkpoint else None,
        "final_reward": result.metrics[-1]["charts/reward"] if result.metrics else None,
    }
    print(json.dumps(summary))
    return 0


def _summary_line(m: dict[str, Any]) -> str:
    def num(key: str) -> str:
        value = m.get(key)
        return "-" if value is None else f"{value:.3f}"

    return (f"update {m['update']:>4}  reward {num('charts/reward')}  "
            f"resolved {num('charts/resolved_rate')}  kl {num('losses/kl')}  "
            f"entropy {num('losses/entropy')}  env {num('perf/env_s')}s  "
            f"gen {num('perf/generation_s')}s  update {num('perf/update_s')}s")
