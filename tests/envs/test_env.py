"""repogym/SWE-v0 through Gymnasium: the env's contract on every backend (the fake one in the
fast suite, no Docker needed; Docker; rootless Podman; the daemonless bwrap), and what only
real containers show."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import repogym  # noqa: F401 - registers the env
from repogym.envs.record import read_record
from repogym.schema import Task

FIX = {
    "name": "str_replace",
    "arguments": {"path": "calc/__init__.py", "old_str": "a - b", "new_str": "a + b"},
}


@pytest.fixture(params=["fake", pytest.param("docker", marks=pytest.mark.docker),
                        pytest.param("podman", marks=[pytest.mark.docker, pytest.mark.podman]),
                        pytest.param("bwrap", marks=[pytest.mark.docker, pytest.mark.bwrap])])
def sandbox(request: pytest.FixtureRequest) -> str:
    """Each contract test runs on every backend; the real ones need the task's image (Podman
    copies Docker's, bwrap exports it as a root file system)."""
    if request.param != "fake":
        request.getfixturevalue("toy_image")
    if request.param == "podman":
        request.getfixturevalue("on_engine")("podman")
    return str(request.param)


def test_registered_on_import() -> None:
    assert "repogym/SWE-v0" in gym.registry
    spec = gym.spec("repogym/SWE-v0")
    assert spec.entry_point == "repogym.envs.swe_env:SWEEnv"


def test_check_env_passes(toy_task: Task, sandbox: str) -> None:
    env = gym.make("repogym/SWE-v0", tasks=[toy_task], sandbox=sandbox)
    try:
        check_env(env.unwrapped, skip_render_check=True)
    finally:
        env.close()


def test_episode_fix_and_submit(toy_task: Task, sandbox: str, tmp_path: Path) -> None:
    env = gym.make("repogym/SWE-v0", tasks=[toy_task], record_dir=tmp_path, reward="shaped",
                   sandbox=sandbox)
    obs, info = env.reset(seed=3)
    workdir = env.unwrapped.sandbox.workdir
    assert toy_task.problem_statement in obs and workdir in obs
    assert workdir == "/testbed" or sandbox == "fake"
    assert obs.count("Tools:") == 1 and obs.count("undo_edit") == 1  # named once
    assert info["task_id"] == toy_task.instance_id and info["split"] == "eval"
    assert info["problem_statement"] == toy_task.problem_statement
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
    assert obs.strip() == f"{workdir}/calc" and reward == 0.0 and not term
    obs, *_ = env.step('{"tool": "bash", "command": "pwd"}')
    assert obs.strip() == f"{workdir}/calc"
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
    assert bool(events[-1]["versions"]["docker_engine"]) == (sandbox in ("docker", "podman"))
    assert events[-1]["versions"]["engine"] == (None if sandbox == "fake" else sandbox)
    assert events[-1]["grading"]["resolved"] is True


def test_null_submit_scores_zero(toy_task: Task, sandbox: str) -> None:
    env = gym.make("repogym/SWE-v0", tasks=[toy_task], sandbox=sandbox)
    env.reset(seed=0)
    _, reward, term, _, info = env.step({"tool": "submit"})
    assert term and reward == 0.0 and not info["resolved"]
    env.close()


def test_budgets_truncate(toy_task: Task, sandbox: str) -> None:
    env = gym.make("repogym/SWE-v0", tasks=[toy_task], max_steps=2, sandbox=sandbox)
    env.reset(seed=0)
    assert not env.step({"tool": "bash", "command": "true"})[3]
    _, reward, term, trunc, info = env.step({"tool": "bash", "command": "true"})
    assert trunc and not term and reward == 0.0 and "max_steps" in info["truncation"]
    env.close()
    env = gym.make("repogym/SWE-v0", tasks=[toy_task], max_observation_chars=1000,
                   sandbox=sandbox)
    env.reset(seed=0)
    _, _, _, trunc, info = env.step({"tool": "bash", "command": "seq 1 5000"})
    assert trunc and "max_observation_chars" in info["truncation"]
    env.close()


@pytest.mark.docker
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


def test_a_vector_env_steps_a_command_and_another_tool_together(toy_task: Task) -> None:
    """A bash step (an int exit code) beside a step of another tool in one vector step: a None
    exit code there broke Gymnasium's info arrays (TypeError), the README's example found it."""
    envs = gym.make_vec("repogym/SWE-v0", num_envs=2, vectorization_mode="sync",
                        tasks=[toy_task], sandbox="fake")
    try:
        envs.reset(seed=0)
        _, _, _, _, info = envs.step(['{"tool": "bash", "command": "exit 3"}',
                                      '{"tool": "view", "path": "calc/__init__.py"}'])
        assert list(info["_exit_code"]) == [True, False] and info["exit_code"][0] == 3
        _, _, terminated, _, _ = envs.step(['{"tool": "bash", "command": "true"}',
                                            '{"tool": "submit"}'])
        assert list(terminated) == [False, True]
    finally:
        envs.close()


def test_unknown_task_id_lists_close_matches(toy_task: Task, sandbox: str) -> None:
    env = gym.make("repogym/SWE-v0", tasks=[toy_task], sandbox=sandbox)
    with pytest.raises(repogym.TaskError, match="toy__calc-1"):
        env.reset(options={"task_id": "toy__calc-2"})
    env.close()


@pytest.mark.docker
def test_tools_leave_the_agents_shell_alone(toy_task: Task, toy_image: str) -> None:
    env = gym.make("repogym/SWE-v0", tasks=[toy_task])
    env.reset(seed=0)
    env.step({"tool": "bash", "command": "cd calc && export KEEP=1"})
    env.step({"tool": "view", "path": "/testbed/calc/__init__.py"})
    obs, *_ = env.step({"tool": "bash", "command": "pwd; echo $KEEP; command -v python"})
    assert obs.split() == ["/testbed/calc", "1", "/opt/venv/bin/python"]
    env.close()


@pytest.mark.docker
def test_plain_pytest_imports_the_repository(toy_task: Task, toy_image: str) -> None:
    """Agents type `pytest` first. The toy repository is not installed and its tests sit in a
    folder of their own, so the pytest script alone would not import `calc` (#35): plain
    `pytest` works as in SWE-bench's images, and a script run from anywhere imports it too."""
    env = gym.make("repogym/SWE-v0", tasks=[toy_task])
    try:
        env.reset(seed=0)
        _, _, _, _, info = env.step({"tool": "bash", "command": "pytest -q tests"})
        assert info["exit_code"] == 0, info["output"]
        assert "2 passed" in info["output"]
        _, _, _, _, info = env.step({"tool": "bash", "command": "cd /tmp && python -c "
                                     "'import calc; print(calc.__file__)'"})
        assert info["output"].strip() == "/testbed/calc/__init__.py"
    finally:
        env.close()


@pytest.mark.docker
def test_plain_pytest_on_the_demo_task_of_the_readme() -> None:
    """The README's first tool call, `pytest -q` on demo__textkit-5 (#35)."""
    env = gym.make("repogym/SWE-v0", suite="demo")
    try:
        env.reset(options={"task_id": "demo__textkit-5"})
        _, _, _, _, info = env.step({"tool": "bash", "command": "pytest -q"})
        assert "ModuleNotFoundError" not in info["output"], info["output"]
        assert info["exit_code"] == 0 and " passed" in info["output"], info["output"]
    finally:
        env.close()


def test_bash_output_exit_code_and_per_call_timeout(toy_task: Task, sandbox: str) -> None:
    env = gym.make("repogym/SWE-v0", tasks=[toy_task], sandbox=sandbox, bash_timeout=2)
    env.reset(seed=0)
    obs, _, _, _, info = env.step({"tool": "bash", "command": "echo hi; exit 3"})
    # the model reads the note; programs read the output and the code apart
    assert obs == "hi\n[exit code 3]" and info["output"] == "hi\n" and info["exit_code"] == 3
    obs, _, _, _, info = env.step({"tool": "bash", "command": "sleep 5", "timeout": 0.5})
    assert info["timed_out"] and "timed out after 0.5 s" in obs
    assert "timed out" not in info["output"]
    obs, _, _, _, info = env.step({"tool": "bash", "command": "sleep 5", "timeout": 60})
    assert info["timed_out"] and "timed out after 2 s" in obs  # capped by bash_timeout
    obs, _, _, _, info = env.step({"tool": "bash", "command": "true", "timeout": -1})
    assert "positive number" in info["action_error"]
    env.close()


def test_unknown_sandbox_names_the_backends(toy_task: Task) -> None:
    with pytest.raises(ValueError, match=r"sandbox='kubernetes': use one of "
                       r"\['bwrap', 'docker', 'fake', 'podman'\]"):
        gym.make("repogym/SWE-v0", tasks=[toy_task], sandbox="kubernetes")


# Runs in a process whose Docker engine is a socket nobody listens on, and in which making a
# Docker client at all fails: a fake-sandbox episode must need neither.
NO_ENGINE = """
import json, sys
import gymnasium as gym
import repogym
from repogym.sandbox import engines
from repogym.schema import Task

def no_client(*args, **kwargs):
    raise AssertionError("a fake-sandbox episode asked for a Docker client")

engines.make_client = no_client
task = Task.from_dict(json.loads(sys.argv[1]))
env = gym.make("repogym/SWE-v0", tasks=[task], sandbox="fake", record_dir=sys.argv[2])
obs, info = env.reset(seed=0)
env.step({"name": "str_replace", "arguments": {"path": "calc/__init__.py",
          "old_str": "a - b", "new_str": "a + b"}})
_, reward, terminated, _, info = env.step({"tool": "submit"})
env.close()
print(json.dumps({"reward": reward, "terminated": terminated, "resolved": info["resolved"]}))
"""


def test_fake_episode_runs_without_a_docker_engine(toy_task: Task, tmp_path: Path) -> None:
    closed = tmp_path / "docker.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(closed))
    listener.close()  # the socket file stays; nothing answers on it
    env = {k: v for k, v in os.environ.items() if k != "REPOGYM_DOCKER_HOSTS"}
    env["DOCKER_HOST"] = f"unix://{closed}"
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(NO_ENGINE),
                           json.dumps(toy_task.to_dict()), str(tmp_path / "records")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result == {"reward": 1.0, "terminated": True, "resolved": True}
    assert "Docker" not in proc.stderr, proc.stderr[-2000:]
