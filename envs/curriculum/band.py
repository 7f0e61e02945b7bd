"""``band``: tasks whose recent success rate lies in a band, where a group of samples still
disagrees and so still teaches (a GRPO group whose rewards are all equal has no advantage).

DAPO's dynamic sampling (arXiv:2503.14476) reaches the same end by over-sampling and dropping
groups that are all right or all wrong; choosing the tasks first spends no rollout on them.
Tasks seen fewer than ``min_episodes`` times are always candidates (their rate is unknown),
and a share ``explore`` of the draws goes to them and to stale tasks: tasks out of the band
that no episode has seen for ``stale`` episodes (the policy may have moved on them).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from repogym.envs.curriculum.stats import StatsTable, TaskStats
from repogym.schema import Task


@dataclass(frozen=True)
class BandSampler:
    low: float = 0.1  # the band of recent success rates, both ends included
    high: float = 0.9
    explore: float = 0.1  # share of draws spent on unseen and stale tasks when there are some
    min_episodes: int = 2  # ended episodes before a task's rate counts
    window: int = 8  # recent ended episodes that make the rate
    stale: int = 0  # episodes unseen before a task out of the band is tried again; 0: 2 x tasks

    def __post_init__(self) -> None:
        if not 0.0 <= self.low <= self.high <= 1.0:
            raise ValueError(f"band {self.low}-{self.high}: give 0 <= LOW <= HIGH <= 1, e.g. "
                             "band:0.1-0.9")
        if not 0.0 <= self.explore <= 1.0:
            raise ValueError(f"explore={self.explore}: give a share between 0 and 1")
        if self.min_episodes < 1 or self.window < 1 or self.stale < 0:
            raise ValueError(f"min={self.min_episodes}, window={self.window}, stale="
                             f"{self.stale}: min and window must be at least 1, stale >= 0")

    def rate(self, stats: TaskStats) -> float | None:
        """The task's recent success rate, None while it is unseen."""
        return stats.recent_rate(self.window) if stats.ended >= self.min_episodes else None

    def pick(self, tasks: Sequence[Task], stats: StatsTable, rng: random.Random) -> Task:
        stale_after = self.stale or 2 * len(tasks)
        unseen, in_band, stale, out = [], [], [], []
        for task in tasks:
            record = stats.get(task.instance_id)
            rate = self.rate(record)
            if rate is None:
                unseen.append(task)
            elif self.low <= rate <= self.high:
                in_band.append(task)
            else:
                out.append(task)
                if stats.episodes - record.last_episode >= stale_after:
                    stale.append(task)
        explore = unseen + stale
        if explore and self.explore and rng.random() < self.explore:
            pool = explore
        elif in_band or unseen:
            pool = in_band + unseen
        elif stale:
            pool = stale
        else:  # nothing in the band yet: the tasks nearest to it
            def gap(t: Task) -> float:
                rate = self.rate(stats.get(t.instance_id)) or 0.0
                return max(self.low - rate, rate - self.high, 0.0)
            best = min(gap(t) for t in out)
            pool = [t for t in out if gap(t) == best]
        return pool[rng.randrange(len(pool))]
