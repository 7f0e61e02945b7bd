"""The sampler seam: the name table, and what each sampler draws given known statistics."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest

from repogym.envs.curriculum import (
    SAMPLERS,
    BandSampler,
    DifficultySampler,
    EpisodeResult,
    StatsStore,
    StatsTable,
    TaskStats,
    WeightsSampler,
    parse,
)
from repogym.envs.curriculum.draws import draw
from repogym.envs.curriculum.hardness import features, order
from repogym.schema import Task
from repogym.suite import load_suite, pick


def task(n: int, patch: str = "", f2p: int = 1) -> Task:
    return Task(instance_id=f"t{n}", repo="r/r", base_commit="0" * 40, problem_statement="x",
                patch=patch, FAIL_TO_PASS=tuple(f"test_{i}" for i in range(f2p)))


def stats_of(rates: dict[str, list[int]], episodes: int = 100, last: int = 100) -> StatsTable:
    return StatsTable({k: TaskStats(attempts=len(v), successes=sum(v), recent=v,
                                    last_episode=last) for k, v in rates.items()}, episodes)


def test_an_unknown_name_raises_and_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="unknown name 'bandit'; use one of uniform, band, "
                                         "difficulty, weights"):
        parse("bandit:0.1-0.9")
    with pytest.raises(ValueError, match="no option 'explor'; its options: explore, min, "
                                         "stale, window"):
        parse("band:0.1-0.9,explor=0.2")
    with pytest.raises(ValueError, match="LOW-HIGH"):
        parse("band:0.5")
    with pytest.raises(ValueError, match="0 <= LOW <= HIGH <= 1"):
        parse("band:0.9-0.1")
    with pytest.raises(ValueError, match="failure=2.0"):
        parse("uniform,failure=2")
    assert set(SAMPLERS) == {"uniform", "band", "difficulty", "weights"}


def test_specs_parse_to_their_samplers() -> None:
    c = parse("band:0.2-0.8,explore=0.05,window=4,failure=0.3")
    assert c.sampler == BandSampler(0.2, 0.8, explore=0.05, window=4) and c.failure == 0.3
    assert parse("difficulty:10,start=0.5").sampler == DifficultySampler(pace=10, start=0.5)
    assert parse("uniform,failure=0.5").failure == 0.5 and parse(None).uniform
    assert isinstance(parse({"t1": 1.0}).sampler, WeightsSampler)


def test_uniform_draws_what_an_env_without_a_sampler_draws() -> None:
    tasks = [task(i) for i in range(7)]
    for seed in range(20):
        expected = pick(tasks, None, random.Random(seed))
        got = draw(tasks, parse("uniform"), StatsStore(), random.Random(seed))
        assert got.task is expected and got.failure is None


def test_band_draws_only_tasks_in_the_band_once_all_are_seen() -> None:
    tasks = [task(i) for i in range(4)]
    table = stats_of({"t0": [1] * 8, "t1": [0] * 8, "t2": [1, 0] * 4, "t3": [0, 0, 0, 1] * 2})
    drawn = Counter(BandSampler(explore=0.0).pick(tasks, table, random.Random(s)).instance_id
                    for s in range(400))
    assert set(drawn) == {"t2", "t3"}, drawn


def test_band_explores_unseen_and_stale_tasks() -> None:
    tasks = [task(i) for i in range(4)]
    # t0 solved always but not seen for 50 episodes (stale after 2 x 4 tasks); t3 never seen
    table = StatsTable({"t0": TaskStats(attempts=8, successes=8, recent=[1] * 8, last_episode=50),
                        "t1": TaskStats(attempts=8, recent=[0] * 8, last_episode=99),
                        "t2": TaskStats(attempts=8, successes=4, recent=[1, 0] * 4,
                                        last_episode=99)}, 100)
    drawn = Counter(BandSampler(explore=0.2).pick(tasks, table, random.Random(s)).instance_id
                    for s in range(2000))
    assert "t1" not in drawn  # out of band and fresh: never
    assert 0.05 < drawn["t0"] / 2000 < 0.15, drawn  # half of the exploring share
    assert drawn["t2"] > drawn["t0"] and drawn["t3"] > drawn["t0"]


def test_band_falls_back_to_the_tasks_nearest_the_band() -> None:
    tasks = [task(i) for i in range(3)]
    table = stats_of({"t0": [1] * 8, "t1": [0] * 8, "t2": [0] * 7 + [1]}, last=100)
    assert {BandSampler(low=0.3, high=0.7, explore=0.0).pick(
        tasks, table, random.Random(s)).instance_id for s in range(50)} == {"t2"}


def test_difficulty_orders_by_the_gold_patch_and_the_tests() -> None:
    small = ("--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@ def f():\n-    return 1\n"
             "+    return 2\n")
    big = ("--- a/a.py\n+++ b/a.py\n@@ -1 +1,3 @@ def f():\n-    return 1\n+    return 2\n"
           "+def g():\n+    return 3\n--- a/b.py\n+++ b/b.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n")
    easy, hard, middle = task(0, small, 1), task(1, big, 5), task(2, small, 3)
    f = features(hard)
    assert (f.patch_lines, f.files, f.functions, f.fail_to_pass) == (6, 2, 2, 5)
    assert [t.instance_id for t in order([hard, middle, easy])] == ["t0", "t2", "t1"]


def test_difficulty_widens_its_frontier_at_its_pace() -> None:
    tasks = load_suite("demo", "all")
    sampler = DifficultySampler(pace=10, start=0.2)
    ordered = sampler.ordered(tasks)
    assert sampler.frontier(len(tasks), 0) == 3 and sampler.frontier(len(tasks), 25) == 5
    assert sampler.frontier(len(tasks), 10_000) == len(tasks)
    early = {sampler.pick(tasks, StatsTable({}, 0), random.Random(s)).instance_id
             for s in range(200)}
    assert early == {t.instance_id for t in ordered[:3]}
    later = {sampler.pick(tasks, StatsTable({}, 25), random.Random(s)).instance_id
             for s in range(300)}
    assert later == {t.instance_id for t in ordered[:5]}


def test_weights_follow_the_file_and_refuse_unknown_tasks(tmp_path: Path) -> None:
    tasks = [task(i) for i in range(3)]
    path = tmp_path / "w.json"
    path.write_text(json.dumps({"t0": 3, "t2": 1}))
    sampler = parse(f"weights:{path}").sampler
    drawn = Counter(sampler.pick(tasks, StatsTable({}, 0), random.Random(s)).instance_id
                    for s in range(4000))
    assert "t1" not in drawn and 2.6 < drawn["t0"] / drawn["t2"] < 3.4, drawn
    with pytest.raises(ValueError, match=r"weights name tasks this env does not have: \['t9'\]"):
        WeightsSampler({"t9": 1.0}).check(tasks)
    with pytest.raises(ValueError, match="finite numbers >= 0"):
        WeightsSampler({"t0": -1.0})


def test_a_sampler_of_ones_own_is_taken_as_it_is() -> None:
    class Last:
        def pick(self, tasks, stats, rng):  # noqa: ANN001, ANN202
            return tasks[-1]

    tasks = [task(i) for i in range(3)]
    assert draw(tasks, parse(Last()), StatsStore(), random.Random(0)).task.instance_id == "t2"
    with pytest.raises(ValueError, match="give a name"):
        parse(42)  # type: ignore[arg-type]


def test_stats_count_attempts_successes_and_reward_moments() -> None:
    store = StatsStore()
    for reward in (1.0, 0.0, 1.0, 0.5):
        store.record(EpisodeResult("t0", True, reward == 1.0, reward, 3))
    store.record(EpisodeResult("t0", False, turns=7))  # cut by a budget: not graded
    s = store.table().get("t0")
    assert (s.attempts, s.successes, s.cut, s.ended) == (4, 2, 1, 5)
    assert s.reward_mean == pytest.approx(0.625)
    assert s.reward_var == pytest.approx(((0.375**2) * 2 + 0.625**2 + 0.125**2) / 3)
    assert s.turns_mean == pytest.approx(3.8) and s.recent == [1, 0, 1, 0, 0]
    assert s.last_episode == 5 and store.table().episodes == 5
