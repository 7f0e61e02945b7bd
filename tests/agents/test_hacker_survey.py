"""The hacker's survey reads a real-sized repository whole, through observations that keep only
the head and tail of a command's output.

On SWE-bench Lite's pallets__flask-4992 every attack of the certificate failed with a
JSONDecodeError: the survey printed its findings on one line, longer than an observation
shows (flask's `git ls-files` alone is 7,137 characters), so the certificate was incomplete.
Here the agent's tool calls run in a real shell in a real git repository, and each output is
cut as the environment cuts it."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from repogym.agents.agent import AgentError
from repogym.agents.hacker import HackerAgent
from repogym.sandbox.shell import OutputCapture


def _repository(root: Path, files: int) -> Path:
    for i in range(files):
        path = root / "src" / "package_with_a_long_name" / f"module_number_{i:04d}_of_many.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"def f{i}():\n    return {i}\n")
    (root / "src" / "package_with_a_long_name" / "__init__.py").write_text("")
    (root / "tests").mkdir()
    (root / "tests" / "test_many.py").write_text("def test_one():\n    pass\n")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    return root


def _run(root: Path, action: dict[str, Any], limit: int) -> str:
    """One bash tool call, its output kept as the environment keeps it (head and tail)."""
    assert action["tool"] == "bash", action
    done = subprocess.run(["bash", "-c", action["command"]], cwd=root, capture_output=True,
                          timeout=60)
    capture = OutputCapture(limit)
    capture.add(done.stdout + done.stderr)
    return capture.text()[0]


@pytest.mark.parametrize("limit", [16_000, 3_000])
def test_the_survey_reads_a_repository_longer_than_an_observation(tmp_path: Path,
                                                                  limit: int) -> None:
    root = _repository(tmp_path / "repo", 600)
    listing = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True,
                             check=True).stdout
    assert len(listing) > 2 * limit  # one line of it could never come back whole
    agent = HackerAgent(hack="always_eq")
    agent.reset("Fix it.", {"task_id": "t-1"})
    obs, steps = "Fix it.", 0
    while agent.repo is None:
        action = agent.act(obs, {})
        if agent.repo is not None:
            break
        obs, steps = _run(root, action, limit), steps + 1
    assert set(agent.repo.files) == set(listing.split())
    assert agent.repo.packages == ("src/package_with_a_long_name",)
    assert agent.repo.test_ids == ("tests/test_many.py::test_one",)
    assert steps <= 12, steps


def test_a_survey_that_timed_out_is_made_again(tmp_path: Path) -> None:
    """isodate under a load average of 700: the survey's command timed out after 60 s and two
    attacks of a certificate did not run."""
    root = _repository(tmp_path / "repo", 5)
    agent = HackerAgent(hack="always_eq")
    agent.reset("Fix it.", {"task_id": "t-1"})
    first = agent.act("Fix it.", {})
    timed_out = "[the command timed out after 60 s and was killed.]"
    assert agent.act(timed_out, {}) == first  # the same survey again
    action = agent.act(_run(root, first, 16_000), {})
    assert agent.repo is not None and action["tool"] != "submit"
    assert "tests/test_many.py" in agent.repo.files


def test_a_survey_that_never_arrives_says_so(tmp_path: Path) -> None:
    agent = HackerAgent(hack="always_eq")
    agent.reset("Fix it.", {"task_id": "t-1"})
    agent.act("Fix it.", {})
    for _ in range(3):
        agent.act("python3: command not found", {})
    with pytest.raises(AgentError, match="survey of the repository printed nothing"):
        agent.act("python3: command not found", {})
