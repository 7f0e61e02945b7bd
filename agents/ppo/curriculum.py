"""``--sampler``: each group's task drawn with the curriculum, once, in the learner's process.

A GRPO or RLOO group compares samples of one task from one start, so its members cannot each
draw: the learner draws for the group (:mod:`repogym.envs.curriculum.draws`) from the same
statistics store the environments record to (the process's, or the driver's copy of every Ray
worker's), and every member resets with that draw's options. With ``failure=P`` a share of
the groups starts from a kept failure of the drawn task, every member from the same snapshot.

``charts/groups_with_variance`` is the share of groups whose rewards are not all equal: only
those give a group-relative advantage that is not zero.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from repogym.agents.ppo.config import TrainConfig
from repogym.agents.ppo.rollout import Trajectory
from repogym.envs.curriculum import check, parse
from repogym.envs.curriculum.draws import draw
from repogym.envs.curriculum.stats import store_for
from repogym.suite import load_suite


def stats_path(config: TrainConfig, run_dir: Path) -> Path:
    return Path(config.stats) if config.stats else run_dir / "task_stats.json"


class GroupDraws:
    """The reset options of each group of an update (None: the seed decides, as without a
    curriculum)."""

    def __init__(self, config: TrainConfig, env_kwargs: dict[str, Any]) -> None:
        self.config = config
        self.curriculum = parse(config.sampler)
        self.active = not self.curriculum.uniform or self.curriculum.failure > 0
        self.store = store_for(env_kwargs.get("stats"))
        self.tasks = (load_suite(env_kwargs["suite"], env_kwargs.get("split") or "train")
                      if self.active else [])
        check(self.curriculum, self.tasks)

    def options(self, update: int, groups: int) -> list[dict[str, Any] | None]:
        if not self.active:
            return [None] * groups
        rng = random.Random(self.config.seed * 1_000_003 + update)
        return [draw(self.tasks, self.curriculum, self.store, rng).options()
                for _ in range(groups)]


def curriculum_metrics(trajs: list[Trajectory], store: Any) -> dict[str, float | None]:
    """The share of groups that teach, and how the statistics stand."""
    by_group: dict[int, list[float]] = {}
    for t in trajs:
        if t.terminated:  # cut episodes are masked out of a critic-free update
            by_group.setdefault(t.job.group, []).append(t.reward)
    compared = [rewards for rewards in by_group.values() if len(rewards) >= 2]
    varied = sum(max(r) != min(r) for r in compared)
    metrics: dict[str, float | None] = {
        "charts/groups_with_variance": varied / len(compared) if compared else None,
        "charts/failure_starts": float(sum(bool(t.fork.get("failure")) for t in trajs)),
    }
    if store is not None:
        table = store.table()
        metrics["curriculum/tasks_seen"] = float(len(table.tasks))
        metrics["curriculum/episodes"] = float(table.episodes)
    return metrics
