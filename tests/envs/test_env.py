"""repogym/SWE-v0 through Gymnasium, against a real engine."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import repogym  # noqa: F401 - registers the env
from repogym.envs.record import read_record
from repogym.tasks.schema import Task

pytestmark = pytest.mark.docker

FIX = {
    "name": "str_replace",
    "arguments": {"path": "calc/__init__.py", "old_str": "a - b", "new_str": "a + b"},
}


def test_registered_on_import() -> None:
    assert "repogym/SWE-v0" in gym.registry
    spec = gym.spec("repogym/SWE-v0")
    assert spec.entry_point == "repogym.envs.swe_env:SWEEnv"


def test_check_env_passes(toy_task: Task, toy_image: str) -> None:
    env = gym.make("repogym/SWE-v0", tasks=[toy_task])
    try:
        check_env(env.unwrapped, skip_render_check=True)
    finally:
        env.close()


def test_episode_fix_and_submit(toy_task: Task, toy_image: str, tmp_path: Path) -> None:
    env = gym.make("repogym/SWE-v0", tasks=[toy_task], record_dir=tmp_path, reward="shaped")
    obs, info = env.reset(seed=3)
    assert toy_task.problem_statement in obs and "/testbed" in obs
    assert obs.count("Tools:") == 1 and obs.count("undo_edit") == 1  # named once
    assert info["task_id"] == toy_task.instance_id and info["split"] == "eval"
    assert {t["function"]["name"] for t in info["tools"]} >= {
        "bash",
        "view",
        "create",
        "str_replace",
        "insert",
        "undo_edit",
        "submit",
    }
    obs, reward, term, trunc, info = env.step({"tool": "bash", "command": "cd calc && pwd"})
    assert obs.strip() == "/testbed/calc" and reward == 0.0 and not term
    obs, *_ = env.step('{"tool": "bash", "command": "pwd"}')
    assert obs.strip() == "/testbed/calc"
    obs, reward, term, trunc, info = env.step("not a tool call")
    assert info["action_error"] and "tool_call" in obs and not term
    obs, *_ = env.step(f"Fixing it.\n<tool_call>{json.dumps(FIX)}</tool_call>")
    assert "a + b" in obs
    obs, reward, term, trunc, info = env.step({"tool": "submit"})
    assert term and not trunc and info["resolved"] and reward == pytest.approx(1.0)
    comps = info["reward_components"]
    assert comps["resolved"] == 1.0 and comps["patch_applied"] == 1.0 and comps["n_steps"] == 5
    assert info["grading"]["fail_to_pass"] == dict.fromkeys(toy_task.FAIL_TO_PASS, "PASSED")
    env.close()
    events = read_record(next(tmp_path.glob("*.jsonl")))
    assert [e["event"] for e in events] == ["reset"] + ["step"] * 5 + ["end"]
    assert events[3]["info"]["action_error"] and events[-1]["reward_components"] == comps
    assert events[-1]["versions"]["repogym"] and events[-1]["versions"]["image"]
    assert events[-1]["grading"]["resolved"] is True


def test_null_submit_scores_zero(toy_task: Task, toy_image: str) -> None:
    env = gym.make("repogym/SWE-v0", tasks=[toy_task])
    env.reset(seed=0)
    _, reward, term, _, info = env.step({"tool": "submit"})
    assert term and reward == 0.0 and not info["resolved"]
    env.close()


def test_budgets_truncate(toy_task: Task, toy_image: str) -> None:
    env = gym.make("repogym/SWE-v0", tasks=[toy_task], max_steps=2)
    env.reset(seed=0)
    assert not env.step({"tool": "bash", "command": "true"})[3]
    _, reward, term, trunc, info = env.step({"tool": "bash", "command": "true"})
    assert trunc and not term and reward == 0.0 and "max_steps" in info["truncation"]
    env.close()
    env = gym.make("repogym/SWE-v0", tasks=[toy_task], max_observation_chars=1000)
    env.reset(seed=0)
    _, _, _, trunc, info = env.step({"tool": "bash", "command": "seq 1 5000"})
    assert trunc and "max_observation_chars" in info["truncation"]
    env.close()


def test_async_vector_env_runs_episodes(toy_task: Task, toy_image: str) -> None:
    envs = gym.make_vec("repogym/SWE-v0", num_envs=2, vectorization_mode="async", tasks=[toy_task])
    try:
        obs, info = envs.reset(seed=7)
        assert len(obs) == 2 and all(toy_task.problem_statement in o for o in obs)
        actions = np.array(
            [
                json.dumps({"name": FIX["name"], "arguments": FIX["arguments"]}),
                '{"tool": "bash", "command": "echo hi"}',
            ],
            dtype=object,
        )
        obs, rewards, term, trunc, info = envs.step(actions)
        assert "a + b" in obs[0] and obs[1].strip() == "hi"
        obs, rewards, term, trunc, info = envs.step(
            np.array(['{"tool": "submit"}'] * 2, dtype=object)
        )
        assert list(term) == [True, True]
        assert list(rewards) == [1.0, 0.0]
    finally:
        envs.close()


def test_unknown_task_id_lists_close_matches(toy_task: Task, toy_image: str) -> None:
    env = gym.make("repogym/SWE-v0", tasks=[toy_task])
    with pytest.raises(repogym.TaskError, match="toy__calc-1"):
        env.reset(options={"task_id": "toy__calc-2"})
    env.close()


def test_tools_leave_the_agents_shell_alone(toy_task: Task, toy_image: str) -> None:
    env = gym.make("repogym/SWE-v0", tasks=[toy_task])
    env.reset(seed=0)
    env.step({"tool": "bash", "command": "cd calc && export KEEP=1"})
    env.step({"tool": "view", "path": "/testbed/calc/__init__.py"})
    obs, *_ = env.step({"tool": "bash", "command": "pwd; echo $KEEP; command -v python"})
    assert obs.split() == ["/testbed/calc", "1", "/opt/venv/bin/python"]
    env.close()
