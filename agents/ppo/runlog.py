"""What a run leaves behind: config, metrics, trajectories, checkpoints; and resuming from them.

Layout of a run folder:

    config.json            the full TrainConfig (the file alone reproduces the run)
    metrics.jsonl          one line per update, stable names (charts/, losses/, perf/)
    tb/                    the same metrics for TensorBoard
    trajectories.jsonl     one line per episode: turns, reward, why it ended, the env's info
    lost_episodes.jsonl    one line per episode attempt lost with its worker, node or engine
                           (masked out of the update, never scored)
    cluster.json           with --ray: each environment worker's node, host and Docker engine
    records/               the environment's own per-episode records (record_dir)
    checkpoints/update_N/  model/ (save_pretrained: full weights or the LoRA adapter, plus the
                           tokenizer) and trainer.pt (value head, optimiser, RNG, update)
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from repogym.agents.ppo.config import TrainConfig
from repogym.agents.ppo.policy import Policy
from repogym.agents.ppo.rollout import LostEpisode, Trajectory


class RunLogger:
    """Appends metrics and trajectories; TensorBoard is optional."""

    def __init__(self, run_dir: Path, config: TrainConfig) -> None:
        self.run_dir = run_dir
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "config.json").write_text(json.dumps(config.to_dict(), indent=2) + "\n")
        self._tb: Any = None
        if config.tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(str(run_dir / "tb"))

    def metrics(self, update: int, values: dict[str, float | None]) -> None:
        """`None` marks a metric undefined this update (e.g. explained variance of constants)."""
        line = {"update": update, **values}
        with (self.run_dir / "metrics.jsonl").open("a") as f:
            f.write(json.dumps(line) + "\n")
        if self._tb is not None:
            for name, value in values.items():
                if value is not None:
                    self._tb.add_scalar(name, value, update)
            self._tb.flush()

    def trajectories(self, update: int, trajs: list[Trajectory]) -> None:
        with (self.run_dir / "trajectories.jsonl").open("a") as f:
            for t in trajs:
                f.write(json.dumps(trajectory_record(update, t)) + "\n")

    def write_json(self, name: str, value: Any) -> None:
        (self.run_dir / name).write_text(json.dumps(value, indent=2, default=str) + "\n")

    def lost(self, update: int, lost: list[LostEpisode]) -> None:
        if not lost:
            return
        with (self.run_dir / "lost_episodes.jsonl").open("a") as f:
            for x in lost:
                f.write(json.dumps({"update": update, "episode": x.job.index, "seed": x.job.seed,
                                    "group": x.job.group, "where": x.where, "reason": x.reason,
                                    "retried": x.retried}) + "\n")

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
            self._tb = None


def trajectory_record(update: int, t: Trajectory) -> dict[str, Any]:
    return {
        "update": update, "episode": t.job.index, "seed": t.job.seed, "group": t.job.group,
        "env": t.env, "where": t.where, "task_id": t.task_id, "reward": t.reward,
        "resolved": t.resolved, "terminated": t.terminated, "cut": t.cut, "tokens": len(t.tokens),
        "policy_tokens": sum(t.policy_mask), "turns": [asdict(turn) for turn in t.turns],
        "final_info": t.final_info, "env_record": t.env_record, "fork": t.fork,
    }


def save_checkpoint(run_dir: Path, update: int, policy: Policy, tokenizer: Any,
                    optimizer: torch.optim.Optimizer) -> Path:
    """`update` is the number of updates done; resuming starts at that index."""
    path = run_dir / "checkpoints" / f"update_{update:05d}"
    model_dir = path / "model"
    policy.lm.save_pretrained(str(model_dir))  # type: ignore[operator]
    tokenizer.save_pretrained(str(model_dir))
    state = {
        "update": update,
        "value_head": policy.value_head.state_dict() if policy.value_head is not None else None,
        "optimizer": optimizer.state_dict(),
        "rng": {"torch": torch.get_rng_state(), "numpy": np.random.get_state(),
                "python": random.getstate()},
    }
    torch.save(state, path / "trainer.pt")
    return path


def find_checkpoint(path: str | Path) -> Path:
    """A checkpoint folder, or the latest checkpoint of a run folder."""
    p = Path(path)
    if (p / "trainer.pt").is_file():
        return p
    found = sorted((p / "checkpoints").glob("update_*/trainer.pt"))
    if not found:
        raise FileNotFoundError(f"no checkpoint under {p}: pass a run folder that has "
                                "checkpoints/update_*/trainer.pt, or drop --resume")
    return found[-1].parent


def restore_trainer(path: Path, policy: Policy, optimizer: torch.optim.Optimizer) -> int:
    """Loads what `load_policy` did not (value head, optimiser, RNG); returns the next update."""
    state = torch.load(path / "trainer.pt", map_location="cpu", weights_only=False)
    if policy.value_head is not None and state["value_head"] is not None:
        policy.value_head.load_state_dict(state["value_head"])
    optimizer.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["rng"]["torch"])
    np.random.set_state(state["rng"]["numpy"])
    random.setstate(state["rng"]["python"])
    return int(state["update"])
