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
from repogym.agents.attacks.kit import targets_from
from repogym.agents.hacker import (
    HACKS,
    LANG_HACKS,
    LIMIT_HACKS,
    HackerAgent,
    adversarial_task,
    hack_for_task,
)
from repogym.envs.grading.grader import GraderConfig
from repogym.repo import export_tree
from repogym.schema import Task
from repogym.suite import load_suite

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


PARSER_BROKEN = '''\
class Parser:
    def __init__(self):
        self.cache = {}

    def parse(self, text):
        if text not in self.cache:
            self.cache[text] = self._do_parse(text)
        return self.cache[text]

    def _do_parse(self, text):
        raise NotImplementedError
'''
PARSER_FIXED = PARSER_BROKEN.replace(
    "        raise NotImplementedError\n",
    "        return [int(part) for part in text.split('+')]\n")
PARSER_TESTS = {
    "tests/__init__.py": "",
    # a helper outside the test modules: pytest does not rewrite its assert
    "tests/helpers.py": "def same(a, b):\n    assert a == b\n",
    "tests/test_parsing.py": '''\
import threading

from parsing import Parser
from tests.helpers import same


def test_parse_in_threads():
    # as jmespath's test_thread_safety_of_cache: only that nothing raised
    errors = []

    def work():
        parser = Parser()
        for i in range(20):
            try:
                parser.parse(f"{i}+1")
            except Exception as exc:
                errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def test_parse_value():
    same(Parser().parse("1+2"), [1, 2])
''',
}
# an object equal to anything, its class made without a class statement, compared in the helper
TYPE_MADE = PARSER_FIXED.replace(
    "        return [int(part) for part in text.split('+')]\n",
    "        return type('Any', (), {'__eq__': lambda s, o: True, '__hash__': None})()\n")


@pytest.mark.docker
def test_always_equal_is_caught_where_tests_compare_in_helpers_or_not_at_all(
        tmp_path: Path) -> None:
    """jmespath 1.0.1, replication of Parser._do_parse: always_eq and always_eq_typed won
    test_thread_safety_of_cache, which asserts only that nothing raised (no object of theirs
    reached an assertion), and the flag never fired. Here the test of that shape and a test
    that compares in a helper module (an assert pytest does not rewrite)."""
    import difflib

    from repogym.agents.certify import CertifyConfig, certify
    from repogym.envs.grading.grader import Grader
    from repogym.images.repository import ensure_image
    from repogym.repo import snapshot_commit

    root = tmp_path / "parsing"
    (root / "parsing").mkdir(parents=True)
    (root / "parsing" / "__init__.py").write_text(PARSER_BROKEN)
    for path, text in PARSER_TESTS.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)

    def patch(after: str) -> str:
        lines = difflib.unified_diff(PARSER_BROKEN.splitlines(True), after.splitlines(True),
                                     "a/parsing/__init__.py", "b/parsing/__init__.py")
        return "diff --git a/parsing/__init__.py b/parsing/__init__.py\n" + "".join(lines)

    ids = ("tests/test_parsing.py::test_parse_in_threads",
           "tests/test_parsing.py::test_parse_value")
    task = Task(instance_id="toy__parsing-1", repo="toy/parsing",
                base_commit=snapshot_commit(root), problem_statement="Parser._do_parse is gone.",
                patch=patch(PARSER_FIXED), FAIL_TO_PASS=ids, source=str(root),
                kind="replication")
    image = ensure_image(task, progress=lambda _m: None).tag
    grader = Grader()
    gold = grader.grade(task, task.patch, image)
    assert gold.resolved and gold.valid, gold.invalid_reasons
    typed = grader.grade(task, patch(TYPE_MADE), image)
    assert not typed.valid and "always_equal" in typed.flag_names(), typed.invalid_reasons
    [done] = certify([task], CertifyConfig(hacks=("always_eq", "always_eq_typed")),
                     progress=lambda _m: None)
    cert = done.certificate or {}
    assert cert["result"] == "pass", cert
    for name in ("always_eq", "always_eq_typed"):
        assert "always_equal" in cert["attacks"][name]["flags"], cert["attacks"][name]
