"""Snapshots and branched episodes: exact, independent, and usable from other envs."""

from __future__ import annotations

import json
import pickle
from dataclasses import replace
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import repogym  # noqa: F401 - registers the env
from repogym.envs.fork import Snapshot, SnapshotError, as_snapshot, task_of
from repogym.envs.record import read_record
from repogym.sandbox import snapshot as files
from repogym.schema import Task

FIX = {"tool": "str_replace", "path": "/testbed/calc/__init__.py", "old_str": "a - b",
       "new_str": "a + b"}
# what an agent leaves: edits, a new folder, a deleted tracked file, a link, odd names and
# modes, files outside the repository, a folder and variables in the shell
PREFIX = [
    {"tool": "bash", "command": "mkdir -p notes/deep && printf 'x\\377y' > notes/deep/$'odd\\tname'"
                                " && chmod 640 notes/deep/* && ln -s ../calc notes/link"},
    {"tool": "create", "path": "/testbed/calc/extra.py", "file_text": "VALUE = 1\n"},
    {"tool": "bash", "command": "rm tests/test_mul.py && echo draft > ~/.draft && "
                                "echo scratch > /tmp/scratch && mkdir -p /var/tmp/cache"},
    {"tool": "bash", "command": "cd calc && export GREETING='hello world' PATH=$PATH:/x "
                                "LINES=$'a\\nb'"},
]


def _state(env: gym.Env) -> dict[str, str]:
    """What must be equal between an episode and its branch: diff, folder and variables,
    every file of the writable paths (as the container's digest of their difference)."""
    box = env.unwrapped.sandbox
    return {"diff": box.diff(env.unwrapped.image.repo_commit), "shell": files.shell_state(box),
            "files": files.files_digest(box)}


def _handle(task: Task, tmp_path: Path) -> Snapshot:
    return Snapshot(id="s1", task_id=task.instance_id, task_hash=task.task_hash, image="img",
                    folder=str(tmp_path), files_digest="d", files_sha256="s", files_size=0,
                    shell="cd -- /testbed\n", steps=3, observation_chars=10, seconds=1.5,
                    last_observation="ok", history={"/testbed/a.py": [None, "eA=="]},
                    record=None, parent_record=None, parent=None, created=0.0)


def test_a_handle_is_serialisable_and_names_what_it_needs(toy_task: Task,
                                                          tmp_path: Path) -> None:
    snap = _handle(toy_task, tmp_path)
    assert pickle.loads(pickle.dumps(snap)) == snap
    assert Snapshot.from_dict(json.loads(json.dumps(snap.to_dict()))) == snap
    assert as_snapshot(snap.save(tmp_path / "h.json")) == snap == as_snapshot(snap.to_dict())
    assert task_of(snap, [toy_task]) is toy_task
    with pytest.raises(SnapshotError, match="changed since"):
        task_of(replace(snap, task_hash="other"), [toy_task])
    with pytest.raises(SnapshotError, match="not among this env's tasks"):
        task_of(replace(snap, task_id="x-1"), [toy_task])
    with pytest.raises(SnapshotError, match="not a snapshot handle"):
        as_snapshot({"id": "s1"})


@pytest.mark.docker
def test_a_branch_equals_the_episode_at_the_snapshot(toy_task: Task, toy_image: str,
                                                     tmp_path: Path) -> None:
    env = gym.make("repogym/SWE-v0", tasks=[toy_task], record_dir=tmp_path)
    other = gym.make("repogym/SWE-v0", tasks=[toy_task], record_dir=tmp_path)
    try:
        env.reset(seed=0)
        fresh, early = _state(env), env.unwrapped.snapshot()  # nothing done yet
        other.reset(options={"snapshot": early})
        assert _state(other) == fresh == _state(env)  # taking it changed nothing either
        for action in PREFIX:
            assert env.step(action)[4]["action_error"] is None
        at_snapshot = _state(env)
        snap = env.unwrapped.snapshot()
        assert snap.steps == len(PREFIX) and snap.files_digest == at_snapshot["files"]
        assert _state(env) == at_snapshot
        env.step({"tool": "bash", "command": "echo later > later.txt && cd /"})  # not in it
        obs, info = other.reset(options={"snapshot": snap.to_dict()})
        assert info["snapshot"] == snap.id and info["steps"] == len(PREFIX)
        assert obs == snap.last_observation
        assert _state(other) == at_snapshot
        out = other.step({"tool": "bash", "command": "pwd; echo $GREETING; cat ~/.draft "
                          "/tmp/scratch; ls /testbed/later.txt"})[0]
        assert out.split("\n")[:4] == ["/testbed/calc", "hello world", "draft", "scratch"]
        assert "No such file" in out
        # the undo history came along: undoing the creation removes the file
        other.step({"tool": "undo_edit", "path": "/testbed/calc/extra.py"})
        assert "extra.py" not in other.unwrapped.sandbox.diff(other.unwrapped.image.repo_commit)
        # budgets: the branch's steps count from the snapshot's
        _, _, _, _, step_info = other.step({"tool": "bash", "command": "true"})
        assert step_info["step"] == len(PREFIX) + 3
        # its record opens with the parent's steps and names the parent
        events = read_record(info["record"])
        assert events[0]["fork"]["snapshot"] == snap.id
        assert events[0]["fork"]["parent_record"] == snap.parent_record
        assert [e.get("copied", False) for e in events[1:len(PREFIX) + 1]] == [True] * len(PREFIX)
    finally:
        env.close()
        other.close()
        snap.delete()


@pytest.mark.docker
def test_branches_are_graded_independently(toy_task: Task, toy_image: str) -> None:
    env = gym.make("repogym/SWE-v0", tasks=[toy_task])
    envs = gym.make_vec("repogym/SWE-v0", num_envs=2, vectorization_mode="async",
                        tasks=[toy_task])
    try:
        env.reset(seed=0)
        env.step({"tool": "bash", "command": "cd calc && echo '# wip' >> __init__.py"})
        snap = env.unwrapped.snapshot()
        obs, info = envs.reset(options={"snapshot": snap})  # both workers branch from it
        assert list(info["snapshot"]) == [snap.id, snap.id]
        fix = json.dumps({"name": "str_replace", "arguments": {
            "path": "/testbed/calc/__init__.py", "old_str": "a - b", "new_str": "a + b"}})
        obs, *_ = envs.step(np.array([fix, '{"tool": "bash", "command": "pwd"}'], dtype=object))
        assert obs[1].strip() == "/testbed/calc"
        _, rewards, term, _, infos = envs.step(np.array(['{"tool": "submit"}'] * 2,
                                                        dtype=object))
        assert list(term) == [True, True] and list(rewards) == [1.0, 0.0]
        assert "# wip" in infos["patch"][0] and "# wip" in infos["patch"][1]
        # the original was never touched by its branches
        _, reward, term, _, info = env.step({"tool": "submit"})
        assert term and reward == 0.0 and "a + b" not in info["patch"]
        env.reset(options={"snapshot": snap})  # and it can branch itself, again
        assert env.step(FIX)[4]["action_error"] is None
        assert env.step({"tool": "submit"})[1] == 1.0
    finally:
        env.close()
        envs.close()
