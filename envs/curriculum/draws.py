"""One draw of the curriculum: the task of the next episode and where it starts.

The env draws at every ``reset``; a trainer that needs several episodes of one task (a GRPO
group) draws once in its own process and passes the result to every member's reset
(:meth:`Draw.options`), with the same statistics store the envs write to.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from repogym.envs.curriculum import Curriculum
from repogym.envs.curriculum.failures import choose
from repogym.envs.curriculum.stats import StatsTable
from repogym.schema import Task
from repogym.suite import pick

STARTS = ("task", "failure")


@dataclass(frozen=True)
class Draw:
    task: Task
    failure: dict[str, Any] | None = None  # the failure bank's entry to start from
    wanted_failure: bool = False  # a failure start was asked for (kept ones may be none)

    def options(self) -> dict[str, Any]:
        """``reset`` options that start an episode exactly here."""
        if self.failure is not None:
            return {"start": "failure", "snapshot": self.failure["snapshot"]}
        return {"task_id": self.task.instance_id, "start": "task"}


def draw(tasks: Sequence[Task], curriculum: Curriculum, store: Any, rng: random.Random,
         task_id: str | None = None, start: str | None = None) -> Draw:
    """The next episode's task (``task_id``, or the sampler's draw) and start: ``"task"``,
    ``"failure"`` (a kept failure of the task, when there is one) or ``None`` (a failure with
    the curriculum's ``failure`` share)."""
    if start not in (None, *STARTS):
        raise ValueError(f"options['start']={start!r}: use one of {STARTS}")
    if task_id is not None:
        task = pick(list(tasks), task_id, rng)
    elif start == "failure":  # a task that has a failure to start from, if any has
        have = store.with_failures()
        pool = [t for t in tasks if t.instance_id in have] or list(tasks)
        task = curriculum.sampler.pick(pool, _table(curriculum, store), rng)
    else:
        task = curriculum.sampler.pick(tasks, _table(curriculum, store), rng)
    wanted = start == "failure" or (
        start is None and curriculum.failure > 0 and rng.random() < curriculum.failure)
    entry = choose(store, task.instance_id, rng) if wanted else None
    return Draw(task, entry, wanted)


def _table(curriculum: Curriculum, store: Any) -> StatsTable:
    # the uniform sampler reads no statistics: a worker need not ask its parent for them
    return StatsTable({}, 0) if curriculum.uniform else store.table()
