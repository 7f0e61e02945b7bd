"""The sampler seam: which task an episode gets, given how every task has gone so far."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from repogym.envs.curriculum.stats import StatsTable
from repogym.schema import Task


@runtime_checkable
class Sampler(Protocol):
    """Draws the next task. ``pick`` must draw only with ``rng`` (so a seed reproduces a run
    whose statistics are the same) and must return one of ``tasks``.

    A sampler may also define ``check(tasks)``, called once with the env's tasks, to refuse a
    configuration that cannot work with them (weights naming tasks the env does not have).
    """

    def pick(self, tasks: Sequence[Task], stats: StatsTable, rng: random.Random) -> Task: ...
