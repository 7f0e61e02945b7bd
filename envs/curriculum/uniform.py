"""``uniform``: every task alike, whatever has happened (the default, as before curricula)."""

from __future__ import annotations

import random
from collections.abc import Sequence

from repogym.envs.curriculum.stats import StatsTable
from repogym.schema import Task


class UniformSampler:
    """One ``rng.randrange`` per draw: the same tasks for the same seed as an env without a
    sampler."""

    def pick(self, tasks: Sequence[Task], stats: StatsTable, rng: random.Random) -> Task:
        return tasks[rng.randrange(len(tasks))]

    def __repr__(self) -> str:
        return "UniformSampler()"
