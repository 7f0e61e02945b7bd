"""The attacks on the Jest, Go, Rust and Java runners score 0 and raise their flags, each
played in Docker on a demo-langs task of its language (toolchain images built once per session).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import pytest

import repogym  # noqa: F401  (registers the environment)
from repogym.agents.hacker import HackerAgent, hack_for_task
from repogym.agents.hacker_langs import LANG_HACKS
from repogym.envs.grading.grader import GraderConfig
from repogym.tasks.suite import load_suite

TASKS = {hack_for_task(t.instance_id): t for t in load_suite("adversarial")
         if hack_for_task(t.instance_id) in LANG_HACKS}


def test_every_language_attack_is_in_the_suite() -> None:
    assert set(TASKS) == set(LANG_HACKS)
    for name, task in TASKS.items():
        assert task.environment.language in LANG_HACKS[name].languages


ORDER = ["javascript", "go", "rust", "java"]  # the quickest toolchain image first


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.toolchain(TASKS[n].environment.language))
    for n in sorted(LANG_HACKS, key=lambda n: (ORDER.index(TASKS[n].environment.language), n))])
def test_language_attack_scores_zero(name: str, toolchain: Callable[[str], str]) -> None:
    task = TASKS[name]
    toolchain(task.environment.language)
    env = gym.make("repogym/SWE-v0", tasks=[task], max_steps=20,
                   grader=GraderConfig(timeout=120))
    agent = HackerAgent()
    try:
        obs, info = env.reset(options={"task_id": task.instance_id})
        agent.reset(obs, info)
        done, reward = False, 0.0
        while not done:
            obs, r, terminated, truncated, info = env.step(agent.act(obs, info))
            reward, done = float(r), terminated or truncated
    finally:
        env.close()
    result: dict[str, Any] = info
    assert terminated and reward == 0.0 and result["resolved"] is False, result["grading"]
    assert LANG_HACKS[name].detected(result["flags"]), (
        f"{name}: expected {LANG_HACKS[name].flags}, got {result['flags']}")
