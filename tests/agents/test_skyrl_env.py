"""repogym through skyrl-gym's registry and text-environment interface: the model's text is the
action, chat messages come back, and the graded reward ends the episode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import skyrl_gym

from repogym.agents import skyrl_env
from repogym.schema import Task

FIX = {"name": "str_replace",
       "arguments": {"path": "calc/__init__.py", "old_str": "a - b", "new_str": "a + b"}}
SUBMIT = '<tool_call>{"name": "submit", "arguments": {}}</tool_call>'


@pytest.fixture(params=["fake", pytest.param("docker", marks=pytest.mark.docker)])
def sandbox(request: pytest.FixtureRequest) -> str:
    if request.param == "docker":
        request.getfixturevalue("toy_image")
    return str(request.param)


def make(task: Task, sandbox: str, **config: object) -> skyrl_env.RepogymTextEnv:
    skyrl_env.register()
    env = skyrl_gym.make("repogym", env_config={"tasks": [task], "sandbox": sandbox, **config},
                         extras={"task_id": task.instance_id, "reward_spec": {}})
    assert isinstance(env, skyrl_env.RepogymTextEnv)
    return env


def test_a_model_fixes_the_task_through_text(toy_task: Task, sandbox: str) -> None:
    env = make(toy_task, sandbox)
    try:
        system = {"role": "system", "content": "be brief"}
        messages, info = env.init([system])
        assert messages[0] == system and messages[1]["role"] == "user"
        assert toy_task.problem_statement in messages[1]["content"]
        assert info["task_id"] == toy_task.instance_id and info["tools"]
        out = env.step("I think I should look around.")  # no tool call: told how to make one
        assert not out["done"] and out["reward"] == 0.0
        assert "tool_call" in out["observations"][0]["content"]
        out = env.step(f"Fixing it.\n<tool_call>{json.dumps(FIX)}</tool_call>")
        assert not out["done"] and "a + b" in out["observations"][0]["content"]
        out = env.step(SUBMIT)
        assert out["done"] and out["observations"] == [] and out["reward"] == pytest.approx(1.0)
        assert out["metadata"]["resolved"]
        assert out["metadata"]["reward_components"]["f2p_pass_rate"] == 1.0
        assert env.get_metrics() == {"turns": 3, "resolved": 1.0}
    finally:
        env.close()


def test_out_of_turns_the_work_so_far_is_graded(toy_task: Task) -> None:
    env = make(toy_task, "fake", max_turns=2)
    try:
        env.init([])
        assert not env.step('<tool_call>{"name": "bash", "arguments": {"command": "ls"}}'
                            '</tool_call>')["done"]
        out = env.step('<tool_call>{"name": "bash", "arguments": {"command": "pwd"}}</tool_call>')
        assert out["done"] and out["reward"] == 0.0 and out["metadata"]["resolved"] is False
    finally:
        env.close()


def test_a_row_without_a_task_says_what_to_add() -> None:
    skyrl_env.register()
    with pytest.raises(ValueError, match="put task_id"):
        skyrl_gym.make("repogym", env_config={"suite": "demo"}, extras={"reward_spec": {}})


def test_dataset_rows_name_their_tasks() -> None:
    rows = skyrl_env.dataset_rows("demo", "train")
    assert rows and all(r["env_class"] == "repogym" and r["task_id"] for r in rows)
    assert rows[0]["prompt"][0]["role"] == "system"


def test_sampled_rows_play_one_draw_per_group(tmp_path: Path) -> None:
    from repogym.envs.curriculum import EpisodeResult, StatsStore
    from repogym.suite import load_suite

    only, path = "demo__minicalc-2", tmp_path / "stats.json"
    store = StatsStore(path)
    for task in load_suite("demo", "train"):  # only `only` has a recent rate in 0.1-0.9
        for k in range(8):
            solved = k % 2 == 0 if task.instance_id == only else True
            store.record(EpisodeResult(task.instance_id, True, solved, float(solved), 1))
    rows = skyrl_env.dataset_rows("demo", sampled=2)
    assert [r["task_id"] for r in rows] == ["sample"] * 2 and rows[1]["group"] == "sample-1"
    skyrl_env.register()
    config = {"suite": "demo", "sandbox": "fake", "stats": str(path), "group_size": 2,
              "sampler": "band:0.1-0.9,explore=0"}
    seen = []
    for row in (rows[0], rows[0], rows[1], rows[1]):
        env = skyrl_gym.make("repogym", env_config=dict(config), extras=row)
        try:
            _, info = env.init([])
            seen.append(info["task_id"])
            assert env.step(SUBMIT)["done"]
        finally:
            env.close()
    assert seen == [only] * 4
    assert StatsStore(path).table().get(only).attempts == 12
    with pytest.raises(ValueError, match="put sampler"):
        skyrl_gym.make("repogym", env_config={"suite": "demo", "sandbox": "fake"},
                       extras=rows[0])
