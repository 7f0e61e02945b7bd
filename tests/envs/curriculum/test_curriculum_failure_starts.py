"""Starts from where agents fail: an episode that begins K turns before the end of an earlier
failed episode is that episode at that turn (files, working folder, variables), and says so."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import gymnasium as gym
import pytest

import repogym  # noqa: F401 - registers the env
from repogym.schema import Task

SETUP = ("mkdir -p work/deep && cd work && export FOO=bar && echo one > made.txt && "
         "echo note > /tmp/note.txt")
EDIT = {"tool": "str_replace", "path": "/testbed/calc/__init__.py", "old_str": "a * b",
        "new_str": "a * b  # touched"}
MORE = "cd deep && export BAR='two words' && echo two >> ../made.txt && unset HOME_MARK"
# reads every file of the repository, /tmp's note, the folder and the variables; changes none
PROBE = ("pwd; env | grep -E '^(FOO|BAR)=' | sort; (cd /testbed && find . -path ./.git -prune "
         "-o -type f -print | sort | xargs md5sum); md5sum /tmp/note.txt; cat ../made.txt")
SUBMIT = {"tool": "submit"}


def test_without_a_kept_failure_the_episode_starts_at_the_task(tmp_path: Path) -> None:
    env = gym.make("repogym/SWE-v0", suite="demo", sandbox="fake")
    try:
        obs, info = env.reset(options={"start": "failure", "task_id": "demo__minicalc-2"})
        assert info["start"] == "task" and "no failed episode of demo__minicalc-2" in \
            info["start_note"]
        with pytest.raises(ValueError, match="use one of"):
            env.reset(options={"start": "middle"})
    finally:
        env.close()
    with pytest.raises(ValueError, match="sandbox='docker' or 'podman' \\(not 'fake'\\)"):
        gym.make("repogym/SWE-v0", suite="demo", sandbox="fake", failure_starts=2)


@pytest.mark.docker
def test_a_failure_start_is_the_failed_episode_k_turns_before_its_end(
        toy_task: Task, toy_image: str, tmp_path: Path) -> None:
    records = tmp_path / "records"
    env = gym.make("repogym/SWE-v0", tasks=[toy_task], failure_starts=2, record_dir=records,
                   stats=tmp_path / "stats.json", run_id=f"curfail-{uuid.uuid4().hex[:6]}")
    try:
        env.reset()
        outputs = []
        for action in ({"tool": "bash", "command": SETUP}, EDIT,
                       {"tool": "bash", "command": MORE}, {"tool": "bash", "command": PROBE},
                       SUBMIT):
            obs, reward, term, _, info = env.step(action)
            outputs.append(obs)
        assert term and reward == 0.0  # add is still wrong: a failed episode of 5 turns
        parent_record = next(records.iterdir())
        kept = env.unwrapped.task_stats.failures(toy_task.instance_id)
        assert len(kept) == 1 and kept[0]["snapshot"]["steps"] == 3  # 5 - 2 turns
        assert Path(kept[0]["snapshot"]["folder"]).parent == tmp_path / "stats.json.failures"

        obs, info = env.reset(options={"start": "failure"})
        assert info["start"] == "failure" and info["steps"] == 3
        assert info["failure"]["parent_record"] == str(parent_record)
        assert info["failure"]["rewind"] == 2 and info["failure"]["parent_steps"] == 5
        assert [t["action"] for t in info["prefix_turns"]] == [
            json.dumps({"tool": "bash", "command": SETUP}), json.dumps(EDIT),
            json.dumps({"tool": "bash", "command": MORE})]
        assert info["prompt"] in obs and "cd deep && export BAR" in obs  # the prefix as context
        # the same call at the same turn sees the same files, folder and variables
        probe, *_ = env.step({"tool": "bash", "command": PROBE})
        assert probe == outputs[3]
        assert "/testbed/work/deep" in probe and "BAR=two words" in probe
        # the branch is an episode of its own: graded on its own change
        env.step({"tool": "str_replace", "path": "/testbed/calc/__init__.py",
                  "old_str": "a - b", "new_str": "a + b"})
        _, reward, term, *_ = env.step(SUBMIT)
        assert term and reward == 1.0
        branch = max(records.iterdir(), key=lambda p: p.stat().st_mtime)
        reset = json.loads(branch.read_text().splitlines()[0])
        assert reset["start"] == "failure"
        assert reset["failure"]["parent_record"] == str(parent_record)
        assert reset["fork"]["parent_record"] == str(parent_record)
        stats = env.unwrapped.task_stats.table().get(toy_task.instance_id)
        assert (stats.attempts, stats.successes) == (2, 1)
    finally:
        env.close()
