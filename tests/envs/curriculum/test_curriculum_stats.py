"""Per-task statistics: updated by every episode that ends, shared by the envs of a process and
an async vector env's workers, kept in a file that a restarted run reads back."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import repogym  # noqa: F401 - registers the env
from repogym.envs.curriculum import EpisodeResult, StatsStore
from repogym.envs.curriculum.stats import store_for
from repogym.suite import load_suite

SUBMIT = '{"tool": "submit"}'
TRAIN = [t.instance_id for t in load_suite("demo", "train")]
ONLY = "demo__minicalc-2"  # the one train task the prepared statistics leave in the band


def play(env: gym.Env, actions: list[object]) -> tuple[dict, float, dict]:
    _, info = env.reset()
    for action in actions:
        _, reward, term, trunc, end = env.step(action)
        if term or trunc:
            return info, float(reward), end
    raise AssertionError("the episode did not end")


def prepared(path: Path) -> Path:
    """A statistics file in which every train task is seen and fresh, and only ONLY is in
    the band: a band sampler with no exploration can draw nothing else."""
    store = StatsStore(path)
    for task_id in TRAIN:
        for k in range(8):
            resolved = k % 2 == 0 if task_id == ONLY else task_id.endswith("5")
            store.record(EpisodeResult(task_id, True, resolved, float(resolved), 2))
    return path


def test_every_ended_episode_updates_its_task(tmp_path: Path) -> None:
    # a file of its own: the process's in-memory store is shared with the tests run before
    env = gym.make("repogym/SWE-v0", suite="demo", sandbox="fake", max_steps=2,
                   stats=tmp_path / "stats.json")
    try:
        info, reward, _ = play(env, [SUBMIT])
        cut_info, _, end = play(env, ['{"tool": "bash", "command": "true"}'] * 3)
        assert end["truncation"].startswith("max_steps")
        table = env.unwrapped.task_stats.table()
        first = table.get(info["task_id"])
        assert first.attempts >= 1 and first.reward_mean == reward == 0.0
        assert table.get(cut_info["task_id"]).cut == 1 and table.episodes == 2
    finally:
        env.close()


def test_envs_of_a_process_share_one_store(tmp_path: Path) -> None:
    path = tmp_path / "stats.json"
    a = gym.make("repogym/SWE-v0", suite="demo", sandbox="fake", stats=path)
    b = gym.make("repogym/SWE-v0", suite="demo", sandbox="fake", stats=str(path))
    try:
        play(a, [SUBMIT])
        play(b, [SUBMIT])
        assert a.unwrapped.task_stats is b.unwrapped.task_stats is store_for(path)
        assert json.loads(path.read_text())["episodes"] == 2
    finally:
        a.close()
        b.close()


RESUME = """
import sys, gymnasium as gym, repogym
env = gym.make("repogym/SWE-v0", suite="demo", sandbox="fake", stats=sys.argv[1],
               sampler="band:0.1-0.9,explore=0")
drawn = set()
for seed in range(6):
    obs, info = env.reset(seed=seed)
    drawn.add(info["task_id"])
    env.step('{"tool": "submit"}')
env.close()
print(sorted(drawn))
"""


def test_statistics_survive_a_restart(tmp_path: Path) -> None:
    path = prepared(tmp_path / "stats.json")
    before = json.loads(path.read_text())
    out = subprocess.run([sys.executable, "-c", RESUME, str(path)], capture_output=True,
                         text=True, check=True).stdout
    # the restarted process drew from the band the file describes, and kept counting
    assert out.strip() == str([ONLY])
    after = json.loads(path.read_text())
    assert after["episodes"] == before["episodes"] + 6
    assert after["tasks"][ONLY]["attempts"] == before["tasks"][ONLY]["attempts"] + 6
    with pytest.raises(ValueError, match="not a task statistics file"):
        (tmp_path / "bad.json").write_text("[1, 2]")
        StatsStore(tmp_path / "bad.json")


def async_round(path: Path, **kwargs: object) -> tuple[list[str], np.ndarray]:
    envs = gym.make_vec("repogym/SWE-v0", num_envs=4, vectorization_mode="async",
                        suite="demo", sampler="band:0.1-0.9,explore=0", stats=str(path),
                        **kwargs)
    try:
        _, infos = envs.reset(seed=0)
        _, rewards, term, _, _ = envs.step(np.array([SUBMIT] * 4, dtype=object))
        assert term.all()
        return list(infos["task_id"]), rewards
    finally:
        envs.close()


def test_an_async_vector_env_of_4_shares_the_parents_statistics(tmp_path: Path) -> None:
    path = prepared(tmp_path / "stats.json")
    before = json.loads(path.read_text())
    drawn, _ = async_round(path, sandbox="fake")
    # each worker drew from the parent's statistics (its own would be empty: uniform draws)
    assert drawn == [ONLY] * 4
    store = store_for(path)  # the parent's: every worker's episode was recorded here
    assert store.table().episodes == before["episodes"] + 4
    assert json.loads(path.read_text())["tasks"][ONLY]["attempts"] == 8 + 4


@pytest.mark.docker
def test_an_async_vector_env_of_4_shares_statistics_in_docker(tmp_path: Path) -> None:
    path = prepared(tmp_path / "stats.json")
    drawn, rewards = async_round(path, run_id=f"curstats-{uuid.uuid4().hex[:6]}")
    assert drawn == [ONLY] * 4 and not rewards.any()  # nothing changed: not resolved
    saved = json.loads(path.read_text())
    assert saved["episodes"] == 8 * len(TRAIN) + 4
    assert saved["tasks"][ONLY]["attempts"] == 12 and saved["tasks"][ONLY]["successes"] == 4


def test_changes_bring_a_copy_up_to_date_and_late_old_ones_are_left_out() -> None:
    driver, copy = StatsStore(), StatsStore()
    driver.record(EpisodeResult("a", True, True, 1.0, 1))
    old = driver.changes_since(0)
    driver.record(EpisodeResult("a", True, False, 0.0, 1))
    new = driver.changes_since(0)
    assert old is not None and new is not None
    copy.apply(new)
    copy.apply(old)  # crossed on the way: older than what the copy has
    assert copy.table().get("a").attempts == 2 and copy.table().episodes == 2
    assert driver.changes_since(new["version"]) is None
