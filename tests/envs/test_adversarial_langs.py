"""The attacks on the Jest, Go, Rust and Java runners score 0 and raise their flags.

Like ``test_demo_langs.py``, CI plays the Go attacks; ``REPOGYM_TEST_LANGS=all`` (or a comma
list) plays the others, whose toolchain images take minutes to build.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import pytest

import repogym  # noqa: F401  (registers the environment)
from repogym import settings
from repogym.agents.hacker import HackerAgent, hack_for_task
from repogym.agents.hacker_langs import LANG_HACKS
from repogym.envs.grading.grader import GraderConfig
from repogym.tasks.suite import load_suite

TASKS = {hack_for_task(t.instance_id): t for t in load_suite("adversarial")
         if hack_for_task(t.instance_id) in LANG_HACKS}


def wanted(language: str) -> bool:
    chosen = settings.TEST_LANGS.get()
    return chosen == "all" or language in {c.strip() for c in chosen.split(",")}


def test_every_language_attack_is_in_the_suite() -> None:
    assert set(TASKS) == set(LANG_HACKS)
    for name, task in TASKS.items():
        assert task.environment.language in LANG_HACKS[name].languages


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.xfail(reason="scores 0 but raises no report_mismatch "
                                            "yet (the forged lines do not reach the log)"))
    if n == "go_fake_lines" else n for n in sorted(LANG_HACKS)])
def test_language_attack_scores_zero(name: str) -> None:
    task = TASKS[name]
    if not wanted(task.environment.language):
        pytest.skip(f"{task.environment.language}: set REPOGYM_TEST_LANGS=all to run it")
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
