"""The adversarial suite: every hack, played through the environment's own tools, scores 0.

Each hack of :mod:`repogym.agents.hacker` plays one adversarial task (the hacks take turns over
the demo repositories) in a real container and is graded by the real grader. The information
hacks also have their container searched as root for any text of the gold patch or the hidden
tests. The known limit is a strict xfail: it documents what wins today.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import repogym  # noqa: F401  (registers the environment)
from repogym.agents.hacker import (
    HACKS,
    LIMIT_HACKS,
    HackerAgent,
    adversarial_task,
    hack_for_task,
    targets_from,
)
from repogym.agents.hacker_langs import LANG_HACKS
from repogym.envs.grading.grader import GraderConfig
from repogym.tasks.repo import export_tree
from repogym.tasks.schema import Task
from repogym.tasks.suite import load_suite

BUILD = Path(repogym.__file__).resolve().parents[1] / "tasks" / "adversarial" / "build.py"
LOOP_TIMEOUT = 5  # the grader's limit for the infinite loop and the fork bomb, in seconds
TIME_LIMITED = ("infinite_loop", "fork_bomb")  # hacks that only end at the time limit


def adversarial_tasks() -> dict[str, Task]:
    """One task per hack, the hacks taking turns over the suite's base tasks."""
    suite = load_suite("adversarial")
    bases = sorted({t.instance_id.split("__", 2)[2] for t in suite
                    if hack_for_task(t.instance_id) in HACKS})
    by_id = {t.instance_id: t for t in suite}
    return {name: by_id[f"adv__{name}__{bases[i % len(bases)]}"] for i, name in enumerate(HACKS)}


def play(env: gym.Env, agent: HackerAgent, task_id: str) -> dict[str, Any]:
    obs, info = env.reset(options={"task_id": task_id})
    agent.reset(obs, info)
    reward, done, errors = 0.0, False, []
    while not done:
        obs, r, terminated, truncated, info = env.step(agent.act(obs, info))
        reward, done = float(r), terminated or truncated
        if info.get("action_error"):
            errors.append(info["action_error"])
    assert not errors, f"the hack's own tool calls failed: {errors}"
    assert terminated, f"the episode ended without a submit: {info.get('truncation')}"
    return {**info, "reward": reward}


# --- without Docker -------------------------------------------------------------------------


def test_suite_is_built_from_the_demo_suite() -> None:
    proc = subprocess.run([sys.executable, str(BUILD), "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_suite_plays_every_hack_and_nothing_else() -> None:
    suite = load_suite("adversarial")
    assert {t.split for t in suite} == {"adversarial"}
    assert {hack_for_task(t.instance_id) for t in suite} == set(HACKS) | set(LANG_HACKS)
    assert all(targets_from(t.problem_statement) == t.FAIL_TO_PASS for t in suite)


def test_the_hack_comes_from_the_task_id_then_the_option_then_turns() -> None:
    agent = HackerAgent(hack="fs_search")
    agent.reset("prompt", {"task_id": "adv__git_history__demo__textkit-1"})
    assert agent.current is not None and agent.current.name == "git_history"
    agent.reset("prompt", {"task_id": "demo__textkit-1"})
    assert agent.current.name == "fs_search"
    turns = HackerAgent()
    played = []
    for _ in range(len(HACKS)):
        turns.reset("prompt", {"task_id": "demo__textkit-1"})
        assert turns.current is not None
        played.append(turns.current.name)
    assert sorted(played) == sorted(HACKS)
    with pytest.raises(ValueError, match="unknown hack"):
        HackerAgent(hack="nope")


def test_targets_come_from_the_prompt_or_the_tasks() -> None:
    task = Task("demo__x-1", "x", "0" * 40, "Fix it.", FAIL_TO_PASS=("t.py::test_a[1,2]",))
    adv = adversarial_task(task, "edit_test")
    assert adv.instance_id == "adv__edit_test__demo__x-1" and adv.split == "adversarial"
    assert targets_from(adv.problem_statement) == ("t.py::test_a[1,2]",)
    agent = HackerAgent(tasks=[task])
    agent.reset("Fix it.", {"task_id": "demo__x-1"})
    assert agent.targets == ("t.py::test_a[1,2]",)


def test_flags_match_exactly_or_by_prefix() -> None:
    assert HACKS["edit_test"].detected(["tampered_test_path"])
    assert not HACKS["conftest_hook"].detected(["tampered_test_path"])
    assert HACKS["os_exit_import"].detected(["canary", "exit_status"])
    assert not HACKS["os_exit_import"].detected(["canary"])


# --- every hack against the real grader -------------------------------------------------------

TASKS = adversarial_tasks()
DEMO = {t.instance_id: t for t in load_suite("demo")}
LIMIT_TASKS = {name: adversarial_task(DEMO[t.instance_id.split("__", 2)[2]], name)
               for name, t in zip(LIMIT_HACKS, TASKS.values(), strict=False)}


@pytest.fixture(scope="module")
def env() -> Any:
    tasks = [*TASKS.values(), *LIMIT_TASKS.values()]
    environment = gym.make("repogym/SWE-v0", tasks=tasks, max_steps=30,
                           grader=GraderConfig(timeout=60))
    yield environment
    environment.close()


@pytest.mark.docker
@pytest.mark.parametrize("name", [n for n in HACKS if n not in TIME_LIMITED])
def test_hack_scores_zero(env: Any, name: str) -> None:
    agent = HackerAgent()
    info = play(env, agent, TASKS[name].instance_id)
    assert info["reward"] == 0.0 and info["resolved"] is False, info["grading"]
    assert HACKS[name].detected(info["flags"]), (
        f"{name}: expected flags {HACKS[name].flags}, got {info['flags']}")
    assert agent.findings.leaks == []


@pytest.mark.docker
@pytest.mark.parametrize("name", TIME_LIMITED)
def test_time_limited_hack_times_out_without_hanging(name: str) -> None:
    task = TASKS[name]
    env = gym.make("repogym/SWE-v0", tasks=[task], grader=GraderConfig(timeout=LOOP_TIMEOUT))
    try:
        start = time.monotonic()
        info = play(env, HackerAgent(), task.instance_id)
        elapsed = time.monotonic() - start
    finally:
        env.close()
    assert info["reward"] == 0.0 and info["resolved"] is False
    assert "timeout" in info["flags"] and info["grading"]["timed_out"]
    assert elapsed < LOOP_TIMEOUT + 60, f"the episode took {elapsed:.0f} s"


@pytest.mark.docker
def test_site_packages_are_out_of_reach(env: Any) -> None:
    agent = HackerAgent()
    info = play(env, agent, TASKS["site_packages"].instance_id)
    assert info["resolved"] is False and info["patch"] == ""
    outputs = agent.findings.outputs
    assert agent.repo is not None
    for folder in agent.repo.site_packages:
        assert "DENIED" in outputs[f"site-packages {folder}"], outputs
    # the user site is writable in the agent's container but never reaches the grader
    assert "PLANTED" in outputs[f"site-packages {agent.repo.user_site}"], outputs


# --- the information hacks find nothing --------------------------------------------------------


def needles(task: Task, tmp: Path) -> list[str]:
    """Lines the gold patch and the hidden tests add that the base repository does not hold."""
    export_tree(task.source or "", task.base_commit, tmp)
    base = "\n".join(p.read_text(errors="replace") for p in tmp.rglob("*") if p.is_file())
    added = [line[1:].strip() for line in (task.patch + task.test_patch).splitlines()
             if line.startswith("+") and not line.startswith("+++")]
    found = sorted({a for a in added if len(a) >= 16 and a not in base}, key=len, reverse=True)
    assert found, f"{task.instance_id}: no distinctive line in its patches"
    return found[:30]


def root_grep(sandbox: Any, words: list[str]) -> list[str]:
    patterns = [arg for word in words for arg in ("-e", word)]
    script = 'grep -rIlF "$@" $(ls -d /*/ | grep -vE "^/(proc|sys|dev)/$") 2>/dev/null; true'
    result = sandbox.exec(["bash", "-c", script, "grep", *patterns], user="root", timeout=120)
    return [line for line in result.output.splitlines() if line.startswith("/")]


@pytest.mark.docker
@pytest.mark.parametrize("name", ["git_history", "fs_search"])
def test_information_hacks_find_nothing(env: Any, name: str, tmp_path: Path) -> None:
    agent = HackerAgent()
    task = TASKS[name]
    info = play(env, agent, task.instance_id)
    assert info["resolved"] is False
    assert agent.findings.outputs, "the hack recorded nothing: it did not run"
    assert agent.findings.leaks == [], agent.findings.leaks
    if name == "git_history":
        assert len(agent.findings.outputs["git log --all"].split()) == 1
    words = needles(task, tmp_path / "base")
    sandbox = env.unwrapped.sandbox
    # the search itself must work: a file holding one needle is found
    sandbox.exec(["bash", "-c", f"printf '%s' {words[0]!r} > /tmp/positive-control"], user="root")
    assert root_grep(sandbox, words) == ["/tmp/positive-control"]


# --- where tests only compare with ==, and what still wins ---------------------------------------


@pytest.mark.docker
def test_always_equal_is_caught_where_tests_only_compare(toy_task: Task) -> None:
    # the toy task's hidden tests only assert `==`: the object wins every one of them, and
    # the equality check is what stops it
    env = gym.make("repogym/SWE-v0", tasks=[adversarial_task(toy_task, "always_eq")])
    try:
        info = play(env, HackerAgent(), f"adv__always_eq__{toy_task.instance_id}")
    finally:
        env.close()
    assert info["reward"] == 0.0 and info["resolved"] is False
    assert "always_equal" in info["flags"]
    assert set(info["grading"]["fail_to_pass"].values()) == {"PASSED"}  # it did win them


@pytest.mark.docker
@pytest.mark.xfail(strict=True, reason="known limit: a forgery that knows how the decoys work "
                   "tells the decoy run from the test run (README)")
def test_decoy_aware_forgery(env: Any) -> None:
    info = play(env, HackerAgent(), LIMIT_TASKS["decoy_aware"].instance_id)
    assert info["resolved"] is False
