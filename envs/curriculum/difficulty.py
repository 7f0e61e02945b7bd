"""``difficulty``: easy tasks first, harder ones joining at a pace.

The tasks are ordered easy to hard by what is known when they are made
(:mod:`repogym.envs.curriculum.hardness`). At first the easiest ``start`` share of them is
drawn from; one more task joins every ``pace`` ended episodes (counted by the statistics
store, so the frontier survives a restart and is the same in every worker), until all have.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from repogym.envs.curriculum.hardness import order
from repogym.envs.curriculum.stats import StatsTable
from repogym.schema import Task


@dataclass(frozen=True)
class DifficultySampler:
    pace: int = 20  # ended episodes per task added to the frontier
    start: float = 0.25  # share of the tasks (at least one) drawn from at first
    _orders: dict[tuple[str, ...], list[Task]] = field(default_factory=dict, compare=False,
                                                       repr=False)

    def __post_init__(self) -> None:
        if self.pace < 1:
            raise ValueError(f"pace={self.pace}: give episodes per new task, at least 1")
        if not 0.0 < self.start <= 1.0:
            raise ValueError(f"start={self.start}: give a share in (0, 1]")

    def frontier(self, n_tasks: int, episodes: int) -> int:
        """How many of the easiest tasks are drawn from after ``episodes`` ended episodes."""
        first = max(1, math.ceil(self.start * n_tasks))
        return min(n_tasks, first + episodes // self.pace)

    def ordered(self, tasks: Sequence[Task]) -> list[Task]:
        key = tuple(t.instance_id for t in tasks)
        if key not in self._orders:  # the order depends on the tasks only: made once
            self._orders[key] = order(tasks)
        return self._orders[key]

    def pick(self, tasks: Sequence[Task], stats: StatsTable, rng: random.Random) -> Task:
        easy = self.ordered(tasks)[: self.frontier(len(tasks), stats.episodes)]
        return easy[rng.randrange(len(easy))]
