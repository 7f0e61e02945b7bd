"""``weights``: the user says how often each task comes (``weights:FILE.json`` holding
``{"task_id": weight, ...}``, or ``sampler={"task_id": weight}`` in Python). A task the
weights leave out is never drawn."""

from __future__ import annotations

import difflib
import json
import math
import random
from collections.abc import Mapping, Sequence
from pathlib import Path

from repogym.envs.curriculum.stats import StatsTable
from repogym.schema import Task


class WeightsSampler:
    def __init__(self, weights: Mapping[str, float]) -> None:
        bad = {k: v for k, v in weights.items()
               if not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0}
        if bad:
            raise ValueError(f"weights must be finite numbers >= 0; these are not: {bad}")
        if not any(weights.values()):
            raise ValueError("every weight is 0: give at least one task a positive weight")
        self.weights = {str(k): float(v) for k, v in weights.items()}

    @classmethod
    def from_file(cls, path: str) -> WeightsSampler:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"weights:{path}: cannot read a JSON object of task weights "
                             f"({exc}); write {{\"task_id\": weight, ...}} there") from exc
        if not isinstance(data, dict):
            raise ValueError(f"weights:{path} holds a {type(data).__name__}: write a JSON "
                             "object {\"task_id\": weight, ...}")
        return cls(data)

    def check(self, tasks: Sequence[Task]) -> None:
        known = [t.instance_id for t in tasks]
        unknown = sorted(set(self.weights) - set(known))
        if unknown:
            close = difflib.get_close_matches(unknown[0], known, n=3, cutoff=0.3)
            raise ValueError(f"weights name tasks this env does not have: {unknown[:5]} "
                             f"(close: {close}); check the suite and split")
        if not any(self.weights.get(t, 0.0) for t in known):
            raise ValueError("no task of this env has a positive weight")

    def pick(self, tasks: Sequence[Task], stats: StatsTable, rng: random.Random) -> Task:
        weights = [self.weights.get(t.instance_id, 0.0) for t in tasks]
        total = sum(weights)
        if total <= 0:
            raise ValueError("no task of this env has a positive weight")
        point = rng.random() * total
        for task, weight in zip(tasks, weights, strict=True):
            point -= weight
            if point < 0 and weight > 0:
                return task
        return [t for t, w in zip(tasks, weights, strict=True) if w > 0][-1]

    def __repr__(self) -> str:
        return f"WeightsSampler({len(self.weights)} tasks)"
