"""mini-swe-agent, unpatched, resolves demo tasks through the gateway; two episodes at once."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI, start_fake_openai

from repogym.agents.gateway import read_calls
from repogym.agents.harness.interface import command_result
from repogym.schema import Task
from repogym.suite import load_suite

TASKS = ("demo__textkit-1", "demo__minicalc-1")  # eval split: what eval runs


def solution(task: Task) -> list[str]:
    """What the fake model plays: look, apply the fix with git, submit the way mini-swe-agent's
    prompt says to."""
    return ["git status --short && ls",
            f"cat > /tmp/fix.patch <<'PATCH'\n{task.patch}PATCH\n"
            "git apply /tmp/fix.patch && git diff --stat",
            "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached"]


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    tasks = {t.instance_id: t for t in load_suite("demo")}
    server = FakeOpenAI(scripts={tasks[i].problem_statement[:60]: solution(tasks[i])
                                 for i in TASKS})
    httpd = start_fake_openai(server)
    yield server
    httpd.shutdown()
    httpd.server_close()


def test_command_result_reads_the_output_without_the_tools_notes() -> None:
    result = command_result("boom\n[exit code 2]", {"exit_code": 2, "output": "boom\n"})
    assert (result.output, result.exit_code) == ("boom\n", 2)
    assert command_result("[no output]", {"exit_code": 0, "output": ""}).output == ""
    result = command_result("x\n[the command timed out after 5 s and was killed.]",
                            {"exit_code": 124, "timed_out": True, "output": "x"})
    assert (result.output, result.timed_out) == ("x", True)
    assert command_result("Error: ...", {"action_error": "bad"}).exit_code == -1


@pytest.mark.docker
@pytest.mark.slow
def test_mini_swe_agent_resolves_demo_tasks_in_eval(fake: FakeOpenAI, tmp_path: Path) -> None:
    pytest.importorskip("minisweagent")
    from repogym.agents.evaluation.runner import EvalConfig, run_eval
    from repogym.agents.trajectory import convert

    config = EvalConfig(suite="demo", agent="harness:mini-swe-agent", task_ids=TASKS,
                        agent_options={"model": "fake", "base_url": fake.base_url,
                                       "token_ids": True}, workers=2, retries=0,
                        out=str(tmp_path / "run"))
    summary = run_eval(config)
    rows = [json.loads(line) for line in (tmp_path / "run/results.jsonl").read_text().splitlines()]
    assert summary["resolved"] == 2, rows
    for row in rows:
        assert row["error"] is None and row["resolved"] and row["steps"] == 4  # 3 commands, submit
        record = Path(row["record"])
        calls = read_calls(record.with_name(record.name.removesuffix(".jsonl") + ".calls.jsonl"))
        assert len(calls) == 3 and all(c["status"] == 200 for c in calls)
        task = next(t for t in load_suite("demo") if t.instance_id == row["instance_id"])
        for call in calls:  # each call carries its own episode's task, and exact tokens
            first_user = call["request"]["messages"][1]["content"]
            assert task.problem_statement[:60] in first_user
            assert call["prompt_token_ids"] and call["completion_token_ids"]
            assert len(call["logprobs"]) == len(call["completion_token_ids"])
        atif = convert(record, "atif")
        agent_steps = [s for s in atif["steps"] if s["source"] == "agent"]
        assert len(agent_steps) == 3 and atif["final_metrics"]["extra"]["reward"] == 1.0
        assert agent_steps[0]["tool_calls"][0]["arguments"] == {"command": solution(task)[0]}
        assert "<returncode>0</returncode>" in agent_steps[0]["observation"]["results"][0][
            "content"]
        assert agent_steps[1]["metrics"]["completion_token_ids"] == calls[1][
            "completion_token_ids"]
        chat = convert(record, "openai")
        assert [m["role"] for m in chat["messages"]][:2] == ["system", "user"]
        assert chat["messages"][-1]["role"] == "assistant" and chat["tools"]
