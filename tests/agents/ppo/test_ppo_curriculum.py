"""`repogym train --sampler`: groups drawn with the curriculum, their reward variance logged,
and failure starts given to the policy with their prefix as context."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import repogym  # noqa: F401 - registers the env
from repogym.agents.ppo.chat import ChatFormat
from repogym.agents.ppo.config import TrainConfig
from repogym.agents.ppo.curriculum import curriculum_metrics
from repogym.agents.ppo.rollout import EpisodeJob, Trajectory
from repogym.envs.curriculum import EpisodeResult, StatsStore
from repogym.scripts.cli import main
from repogym.suite import load_suite

ONLY = "demo__minicalc-2"
FLAGS = ["--suite", "demo", "--model", "tiny", "--device", "cpu", "--updates", "1",
         "--group-size", "2", "--advantage", "grpo", "--max-turns", "1",
         "--max-new-tokens", "8", "--max-context", "8192", "--micro-batch-size", "1",
         "--no-tensorboard"]


def prepared(path: Path) -> Path:
    """Statistics in which only ONLY of the train tasks is in the band 0.1-0.9."""
    store = StatsStore(path)
    for task in load_suite("demo", "train"):
        for k in range(8):
            resolved = k % 2 == 0 if task.instance_id == ONLY else False
            store.record(EpisodeResult(task.instance_id, True, resolved, float(resolved), 2))
    return path


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def traj(group: int, reward: float, terminated: bool = True) -> Trajectory:
    t = Trajectory(EpisodeJob(index=0, seed=0, group=group), rewards=[reward],
                   terminated=terminated)
    return t


def test_the_share_of_groups_with_reward_variance() -> None:
    trajs = [traj(0, 1.0), traj(0, 0.0), traj(1, 1.0), traj(1, 1.0), traj(2, 0.0),
             traj(2, 0.0), traj(3, 1.0), traj(3, 0.0, terminated=False)]
    # group 3 has one finished episode: nothing to compare; 1 of the other 3 varies
    assert curriculum_metrics(trajs, None)["charts/groups_with_variance"] == pytest.approx(1 / 3)


def test_a_sampler_needs_tasks_and_failure_starts_need_kept_failures() -> None:
    with pytest.raises(ValueError, match="unknown name 'bands'"):
        TrainConfig(sampler="bands:0.1-0.9")
    with pytest.raises(ValueError, match="needs --env-id repogym/SWE-v0"):
        TrainConfig(sampler="band:0.1-0.9", env_id="repogym/ToyText-v0")
    with pytest.raises(ValueError, match="set --failure-starts K"):
        TrainConfig(sampler="band:0.1-0.9,failure=0.5")


def test_groups_are_drawn_with_the_sampler(tmp_path: Path) -> None:
    out = tmp_path / "run"
    stats = prepared(out / "task_stats.json")  # where the run keeps its statistics
    argv = [*FLAGS, "--sampler", "band:0.1-0.9,explore=0", "--episodes-per-update", "4",
            "--num-envs", "2", "--env-kwargs", json.dumps({"sandbox": "fake", "max_steps": 1}),
            "--out", str(out)]
    assert main(["train", *argv]) == 0
    trajs = lines(out / "trajectories.jsonl")
    assert [t["task_id"] for t in trajs] == [ONLY] * 4  # the only task in the band
    metrics = lines(out / "metrics.jsonl")[-1]
    assert "charts/groups_with_variance" in metrics and metrics["curriculum/episodes"] == 8 * 5 + 4
    saved = json.loads(stats.read_text())
    assert saved["tasks"][ONLY]["cut"] == 4  # each cut by max_steps=1, counted, not graded


def test_a_failure_start_opens_with_its_prefix_as_chat_turns(tiny: tuple[Any, Any]) -> None:
    _, tok = tiny
    chat = ChatFormat(tok)
    turns = [{"action": '{"tool": "bash", "command": "ls"}', "observation": "calc\ntests"}]
    ids = chat.continuation_ids("fix add", None, turns)
    prompt = chat.prompt_ids("fix add")
    action = tok('{"tool": "bash", "command": "ls"}', add_special_tokens=False)["input_ids"]
    assert ids[:len(prompt)] == prompt and ids[len(prompt):len(prompt) + len(action)] == action
    assert "calc\ntests" in tok.decode(ids) and len(ids) > len(prompt) + len(action)


@pytest.mark.docker
@pytest.mark.slow
def test_train_draws_failure_starts_of_the_band_on_docker(tmp_path: Path) -> None:
    out = tmp_path / "run"
    stats = prepared(out / "task_stats.json")
    run = f"curtrain-{uuid.uuid4().hex[:6]}"
    # a failed episode of ONLY, played the way any agent's is, keeps its start 2 turns back
    env = gym.make("repogym/SWE-v0", suite="demo", stats=stats, failure_starts=2, run_id=run)
    try:
        env.reset(options={"task_id": ONLY})
        for command in ("export STAGE=1", "echo a > a.txt", "echo b > b.txt"):
            env.step({"tool": "bash", "command": command})
        assert env.step({"tool": "submit"})[2]
    finally:
        env.close()
    argv = [*FLAGS, "--sampler", "band:0.1-0.9,explore=0,failure=1", "--failure-starts", "2",
            "--episodes-per-update", "2", "--num-envs", "2",
            "--env-kwargs", json.dumps({"run_id": run, "max_steps": 3}), "--out", str(out)]
    assert main(["train", *argv]) == 0
    trajs = lines(out / "trajectories.jsonl")
    assert [t["task_id"] for t in trajs] == [ONLY] * 2
    for t in trajs:  # both members of the group from the same kept failure, after 2 turns
        assert t["fork"]["failure"]["step"] == 2 and t["fork"]["prefix_turns"] == 2
    assert trajs[0]["fork"] == trajs[1]["fork"]
    assert lines(out / "metrics.jsonl")[-1]["charts/failure_starts"] == 2.0
