"""Doing nothing earns nothing: every component that could reward an empty or unchanged patch
is 0 for it, on the formulas alone and through the environment on a real engine."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path

import gymnasium as gym
import pytest

import repogym  # noqa: F401 - registers the env
from repogym.envs.grading.grader import GradingReport
from repogym.envs.grading.rewards import (
    binary,
    components,
    pass_rate,
    replication,
    shaped,
    similarity,
    task_similarity,
)
from repogym.repo import read_at
from repogym.schema import Task

REFERENCE = '''def clamp(x, lo, hi):
    """Limits x to [lo, hi]."""
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x
'''
STUB = '''def clamp(x, lo, hi):
    """Limits x to [lo, hi]."""
    raise NotImplementedError
'''


def report(**kw: object) -> GradingReport:
    base: dict[str, object] = {"patch_applied": True, "empty_patch": False, "compiles": True,
                               "f2p_pass_rate": 0.0, "p2p_pass_rate": 1.0}
    return GradingReport("t", **{**base, **kw})  # type: ignore[arg-type]


def test_an_empty_patch_scores_zero_everywhere() -> None:
    empty = report(empty_patch=True, patch_applied=True)
    empty.differential = {"agreement": 0.7, "functions": {}}  # e.g. a partly right start
    c = components(empty, 1, similarity=0.3)
    assert c["patch_applied"] == c["compiles"] == c["similarity"] == c["agreement"] == 0.0
    for fn in (binary, pass_rate, shaped, replication):
        assert fn(c) == 0.0, fn.__name__


def test_a_patch_stripped_whole_or_not_applied_earns_nothing() -> None:
    stripped = report(changed=["tests/test_x.py"], stripped={"tests/test_x.py": "test_file"})
    c = components(stripped, 2, None)
    assert c["patch_applied"] == c["compiles"] == 0.0
    assert shaped(c) == pytest.approx(-0.2)  # the tampering penalty only
    assert components(report(patch_applied=False), 2, None)["compiles"] == 0.0


def test_a_kept_change_still_gets_its_credit() -> None:
    kept = report(changed=["calc/__init__.py", "tests/test_x.py"],
                  stripped={"tests/test_x.py": "test_file"})
    c = components(kept, 2, similarity=0.4)
    assert (c["patch_applied"], c["compiles"], c["similarity"]) == (1.0, 1.0, 0.4)
    assert components(report(compiles=False), 2, None)["compiles"] == 0.0


def test_similarity_counts_from_the_starting_code() -> None:
    assert similarity(REFERENCE, STUB) > 0.2  # a stub shares the signature with the reference
    assert similarity(REFERENCE, STUB, start=STUB) == 0.0
    reformatted = STUB.replace("raise NotImplementedError", "raise NotImplementedError  # todo")
    assert similarity(REFERENCE, "\n" + reformatted, start=STUB) == 0.0
    assert similarity(REFERENCE, REFERENCE, start=STUB) == 1.0
    half = REFERENCE.replace("    if x > hi:\n        return hi\n", "")
    assert 0.2 < similarity(REFERENCE, half, start=STUB) < 1.0
    assert similarity(REFERENCE, "def clamp(x, lo, hi):\n    return 0\n", start=STUB) < 0.2
    bug = REFERENCE.replace("x < lo", "x <= lo")  # a planted bug starts next to the reference
    assert similarity(REFERENCE, bug) > 0.9 and similarity(REFERENCE, bug, start=bug) == 0.0
    assert similarity(REFERENCE, REFERENCE, start=bug) == 1.0


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=a", "-c", "user.email=a@b", *args], cwd=repo,
                          check=True, capture_output=True, text=True).stdout


def test_the_starting_code_is_read_on_the_host(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "calc").mkdir(parents=True)
    (repo / "calc" / "__init__.py").write_text(STUB)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "stub")
    base = _git(repo, "rev-parse", "HEAD").strip()
    (repo / "calc" / "__init__.py").write_text(REFERENCE)  # later work does not count
    _git(repo, "commit", "-qam", "ref")
    assert read_at(str(repo), base, "calc/__init__.py") == STUB
    assert read_at(str(repo), base, "nope.py") is None
    _git(repo, "bundle", "create", str(tmp_path / "repo.bundle"), "--all")
    assert read_at(str(tmp_path / "repo.bundle"), base, "calc/__init__.py") == STUB
    folder = tmp_path / "plain" / "calc"
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text(STUB)
    assert read_at(str(tmp_path / "plain"), None, "calc/__init__.py") == STUB
    task = Task("t", "o/r", base, "p", source=str(repo), kind="replication",
                reference={"file": "calc/__init__.py", "qualname": "clamp", "source": REFERENCE})
    assert task_similarity(task, STUB) == 0.0 and task_similarity(task, REFERENCE) == 1.0
    assert task_similarity(replace(task, source=str(tmp_path / "gone")), REFERENCE) is None


ADD_FIXED = "def add(a, b):\n    return a + b\n"


@pytest.mark.docker
def test_submitting_at_once_or_untouched_earns_nothing(toy_task: Task, toy_image: str) -> None:
    # the toy task as a planted-bug task: `add` starts as `a - b`, the reference is `a + b`
    task = replace(toy_task, kind="synthetic",
                   reference={"file": "calc/__init__.py", "qualname": "add", "source": ADD_FIXED})
    env = gym.make("repogym/SWE-v0", tasks=[task], reward="shaped")
    try:
        env.reset(seed=0)
        _, reward, terminated, _, info = env.step({"tool": "submit"})
        c = info["reward_components"]
        assert terminated and reward == 0.0, c
        assert c["patch_applied"] == c["compiles"] == c["similarity"] == 0.0
        env.reset(seed=0)  # a comment is a change, but not to the function
        env.step({"tool": "bash", "command": "sed -i 's/return a - b/return a - b  # hm/' "
                                             "calc/__init__.py"})
        _, reward, _, _, info = env.step({"tool": "submit"})
        c = info["reward_components"]
        assert c["patch_applied"] == 1.0 and c["similarity"] == 0.0 and c["resolved"] == 0.0
        env.reset(seed=0)
        env.step({"tool": "str_replace", "path": "calc/__init__.py", "old_str": "a - b",
                  "new_str": "a + b"})
        _, reward, _, _, info = env.step({"tool": "submit"})
        c = info["reward_components"]
        assert c["similarity"] == 1.0 and c["resolved"] == 1.0 and reward == pytest.approx(1.0)
    finally:
        env.close()
