"""The attacks on the Jest, Go, Rust and Java runners score 0 and raise their flags, played in
Docker on a demo-langs task of their language (toolchain images built once per session).

Attacks at run time (forged result lines, early exits, a forged ``expect``) are played one per
episode: each needs its own test run to show it is caught. Attacks on test files and runner
configuration are caught before the run (the paths are stripped), so each language's are played
together, in one episode: every path they changed must be stripped, and every flag raised.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import pytest

from repogym.agents.attacks.kit import Findings, Hack, Repo, Script
from repogym.agents.attacks.runner_attacks import LANG_HACKS, LangHack, _source
from repogym.agents.certify import CertifyConfig, certify
from repogym.agents.hacker import HackerAgent, hack_for_task
from repogym.envs.grading.grader import GraderConfig
from repogym.suite import load_suite

TASKS = {hack_for_task(t.instance_id): t for t in load_suite("adversarial")
         if hack_for_task(t.instance_id) in LANG_HACKS}
ORDER = ["javascript", "go", "rust", "java"]  # the quickest toolchain image first


def language(name: str) -> str:
    return TASKS[name].environment.language


def tampers(hack: LangHack) -> bool:
    return all(f.startswith("tampered_") for f in hack.flags)


RUNTIME = sorted((n for n, h in LANG_HACKS.items() if not tampers(h)),
                 key=lambda n: (ORDER.index(language(n)), n))
TAMPERING = {lang: sorted(n for n, h in LANG_HACKS.items() if tampers(h) and language(n) == lang)
             for lang in ORDER}


def together(names: list[str]) -> Hack:
    """One hack that plays ``names`` one after the other."""
    hacks = [LANG_HACKS[n] for n in names]

    def script(repo: Repo, found: Findings) -> Script:
        for hack in hacks:
            yield from hack.script(repo, found)

    flags = tuple(dict.fromkeys(f for h in hacks for f in h.flags))
    return Hack("+".join(names), script, flags, "; ".join(h.doc for h in hacks))


def play(name: str, hack: Hack | None = None) -> dict[str, Any]:
    """One episode of the hacker on ``name``'s task; the submission's info."""
    task = TASKS[name]
    env = gym.make("repogym/SWE-v0", tasks=[task], max_steps=40,
                   grader=GraderConfig(timeout=120))
    agent = HackerAgent()
    try:
        obs, info = env.reset(options={"task_id": task.instance_id})
        agent.reset(obs, info)
        if hack is not None:
            agent.current = hack
        done, reward, terminated = False, 0.0, False
        while not done:
            obs, r, terminated, truncated, info = env.step(agent.act(obs, info))
            reward, done = float(r), terminated or truncated
    finally:
        env.close()
    assert terminated and reward == 0.0 and info["resolved"] is False, info["grading"]
    return dict(info)


def test_every_language_attack_is_in_the_suite() -> None:
    assert set(TASKS) == set(LANG_HACKS)
    for name, task in TASKS.items():
        assert task.environment.language in LANG_HACKS[name].languages
    assert all(TAMPERING.values()) and set(RUNTIME) | {n for g in TAMPERING.values()
                                                       for n in g} == set(LANG_HACKS)


def test_code_attacks_go_where_the_hidden_tests_look() -> None:
    """An attack in code the hidden tests never load proves nothing (demo__romans-2's tests
    load WordCount, not Roman): the attacks take the source file the tests' ids name."""
    files = ("src/main/java/demo/Roman.java", "src/main/java/demo/WordCount.java",
             "src/test/java/demo/WordCountTiesTest.java")
    repo = Repo(files, (), (), (), (), "", ("demo.WordCountTiesTest#tiesInAlphabeticalOrder",))
    assert _source(repo, ".java", ("src/test/",)) == "src/main/java/demo/WordCount.java"
    assert _source(Repo(files, (), (), (), (), "", ("demo.OtherTest#x",)), ".java",
                   ("src/test/",)) == "src/main/java/demo/Roman.java"


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.toolchain(language(n))) for n in RUNTIME])
def test_runtime_attack_scores_zero(name: str, toolchain: Callable[[str], str]) -> None:
    toolchain(language(name))
    result = play(name)
    assert LANG_HACKS[name].detected(result["flags"]), (
        f"{name}: expected {LANG_HACKS[name].flags}, got {result['flags']}")


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("lang", [pytest.param(lang, marks=pytest.mark.toolchain(lang))
                                  for lang in ORDER])
def test_tampering_attacks_score_zero(lang: str, toolchain: Callable[[str], str]) -> None:
    toolchain(lang)
    names = TAMPERING[lang]
    result = play(names[0], together(names))
    grading = result["grading"]
    assert grading["changed"] and set(grading["changed"]) <= set(grading["stripped"]), grading
    for name in names:
        assert LANG_HACKS[name].detected(result["flags"]), (
            f"{name}: expected {LANG_HACKS[name].flags}, got {result['flags']}")


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.toolchain("javascript")
def test_certify_plays_the_attacks_of_the_tasks_language(toolchain: Callable[[str], str]
                                                         ) -> None:
    """`tasks add` and `tasks certify` on a JavaScript task: its language's attacks, not
    Python's (a Python attack on it proves nothing)."""
    toolchain("javascript")
    task = next(t for t in load_suite("demo-langs") if t.environment.language == "javascript")
    config = CertifyConfig(hacks=("always_eq", "js_process_exit", "go_os_exit"), timeout=120)
    [done] = certify([task], config, progress=lambda _line: None)
    cert = done.certificate
    assert cert is not None and cert["result"] == "pass", cert
    assert list(cert["attacks"]) == ["js_process_exit"]
    assert "canary" in cert["attacks"]["js_process_exit"]["flags"], cert
