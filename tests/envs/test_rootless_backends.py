"""The backends that need no root end to end, through ``gym.make(..., sandbox=NAME)``: on
rootless Podman a gold and an empty episode per language, on the daemonless bwrap the Python
one (its tree of each other language's image is a gigabyte to export: `tools/compare_verdicts.py`
runs take those); on both, the attacks whose defence rests on what the backend gives (process
and memory limits, the end of the tests' processes, files out of reach, the results channel,
what the sandbox holds).

Images are built once on Docker and copied to Podman, or exported as trees for bwrap (what
the backends do on a machine that has Docker too).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import pytest

import repogym  # noqa: F401  (registers the environment)
from repogym.agents.gold import GoldAgent
from repogym.agents.hacker import HACKS, HackerAgent, adversarial_task
from repogym.envs.grading.grader import GraderConfig
from repogym.images.repository import ensure_image
from repogym.schema import Task
from repogym.suite import load_suite

pytestmark = pytest.mark.docker
BACKENDS = [pytest.param("podman", marks=pytest.mark.podman),
            pytest.param("bwrap", marks=pytest.mark.bwrap)]

TASKS = {t.instance_id: t for t in [*load_suite("demo"), *load_suite("demo-langs")]}
ONE_PER_LANGUAGE = {"python": "demo__minicalc-1", "javascript": "demo__querykit-1",
                    "go": "demo__semver-1", "rust": "demo__runlength-1", "java": "demo__romans-1"}
# the attacks whose defence rests on what the engine gives: limits, users, the container's files
ENGINE_HACKS = ("fork_bomb", "site_packages", "fake_junit", "os_exit_import", "fs_search")


def play(env: gym.Env, agent: Any, task_id: str) -> dict[str, Any]:
    obs, info = env.reset(options={"task_id": task_id})
    agent.reset(obs, info)
    done, info = False, {}
    while not done:
        obs, reward, terminated, truncated, info = env.step(agent.act(obs, info))
        done = terminated or truncated
    assert terminated, f"the episode ended without a submit: {info.get('truncation')}"
    return {**info, "reward": float(reward)}


def built(task: Task) -> None:
    """The task's image on Docker; the backend copies it to Podman at reset."""
    ensure_image(task, progress=lambda _m: None)


@pytest.mark.slow
@pytest.mark.parametrize("backend,language", [
    *[pytest.param("podman", lang, marks=[pytest.mark.podman, pytest.mark.toolchain(lang)])
      if lang != "python" else pytest.param("podman", lang, marks=pytest.mark.podman)
      for lang in ONE_PER_LANGUAGE],
    pytest.param("bwrap", "python", marks=pytest.mark.bwrap)])
def test_gold_resolves_and_empty_does_not(backend: str, language: str,
                                          request: pytest.FixtureRequest,
                                          on_engine: Callable[[str], None]) -> None:
    task = TASKS[ONE_PER_LANGUAGE[language]]
    if language != "python":  # the session's toolchain images, built in their order
        request.getfixturevalue("toolchain")(language)
    built(task)  # on Docker, before the test moves to Podman
    on_engine(backend)
    env = gym.make("repogym/SWE-v0", tasks=[task], sandbox=backend, split="all")
    try:
        gold = play(env, GoldAgent(tasks=[task]), task.instance_id)
        shown = {k: v for k, v in gold["grading"].items() if k != "log_tail"}
        assert gold["reward"] == 1.0 and gold["resolved"], json.dumps(shown)
        obs, info = env.reset(options={"task_id": task.instance_id})
        *_, empty = env.step({"tool": "submit"})
        assert empty["resolved"] is False and empty["reward_components"]["resolved"] == 0.0
        assert env.unwrapped.images.provenance(env.unwrapped.image)["engine"] == backend
    finally:
        env.close()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ENGINE_HACKS)
def test_attacks_that_lean_on_the_backend_score_zero(backend: str, name: str,
                                                     on_engine: Callable[[str], None]) -> None:
    task = adversarial_task(TASKS["demo__textkit-1"], name)
    built(task)
    on_engine(backend)
    timeout = 5 if name == "fork_bomb" else 60
    env = gym.make("repogym/SWE-v0", tasks=[task], sandbox=backend, max_steps=30,
                   grader=GraderConfig(timeout=timeout))
    try:
        agent = HackerAgent()
        info = play(env, agent, task.instance_id)
    finally:
        env.close()
    assert info["reward"] == 0.0 and info["resolved"] is False, info["grading"]
    assert HACKS[name].detected(info["flags"]), (name, info["flags"])
    assert agent.findings.leaks == []
