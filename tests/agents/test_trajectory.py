"""Episode records as ATIF and OpenAI chat messages, through `repogym show --format`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repogym.agents.trajectory import convert
from repogym.errors import UsageError
from repogym.scripts.cli import main


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_an_env_only_record_becomes_tool_calls(tmp_path: Path, capsys: pytest.CaptureFixture
                                               ) -> None:
    record = _write(tmp_path / "ep.jsonl", [
        {"event": "reset", "time": 0, "task_id": "t1", "observation": "fix it", "model": "m"},
        {"event": "step", "time": 1, "step": 1, "raw_action": "x",
         "parsed": {"name": "bash", "arguments": {"command": "ls"}}, "observation": "a.py"},
        {"event": "step", "time": 2, "step": 2, "raw_action": "gibberish", "parsed": None,
         "observation": "Error: no tool call"},
        {"event": "end", "reward": 1.0, "reward_components": {"resolved": 1.0}, "n_steps": 2}])
    atif = convert(record, "atif")
    assert atif["schema_version"] == "ATIF-v1.5" and atif["agent"]["model_name"] == "m"
    assert [s["source"] for s in atif["steps"]] == ["user", "agent", "agent"]
    assert [s["step_id"] for s in atif["steps"]] == [1, 2, 3]
    call = atif["steps"][1]["tool_calls"][0]
    assert call == {"tool_call_id": "call_1", "function_name": "bash",
                    "arguments": {"command": "ls"}}
    assert atif["steps"][1]["observation"]["results"][0] == {"content": "a.py",
                                                             "source_call_id": "call_1"}
    assert atif["final_metrics"]["extra"]["reward"] == 1.0
    assert main(["show", str(record), "--format", "openai"]) == 0
    chat = json.loads(capsys.readouterr().out)
    assert [m["role"] for m in chat["messages"]] == ["user", "assistant", "tool", "assistant",
                                                     "user"]
    assert chat["tools"][0]["function"]["name"] == "bash"


def test_gateway_calls_are_the_models_view(tmp_path: Path) -> None:
    _write(tmp_path / "ep.jsonl", [{"event": "reset", "task_id": "t1", "observation": "o"}])
    sent = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    reply = {"role": "assistant", "content": "look", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "bash",
                                                      "arguments": "{\"command\": \"ls\"}"}}]}
    calls = [{"index": 0, "session": "ep", "request": {"model": "m", "messages": sent},
              "response": {"choices": [{"message": reply}]}, "usage": {"prompt_tokens": 3,
              "completion_tokens": 2}, "prompt_token_ids": [1, 2, 3],
              "completion_token_ids": [4, 5], "logprobs": [-0.1, -0.2]},
             {"index": 1, "session": "ep", "request": {"model": "m", "messages": [
                 *sent, reply, {"role": "tool", "tool_call_id": "c1", "content": "a.py"}]},
              "response": {"choices": [{"message": {"role": "assistant", "content": "done"}}]}}]
    path = _write(tmp_path / "ep.calls.jsonl", calls)
    atif = convert(path, "atif")
    agent = [s for s in atif["steps"] if s["source"] == "agent"]
    assert agent[0]["observation"]["results"] == [{"content": "a.py", "source_call_id": "c1"}]
    assert agent[0]["metrics"]["completion_token_ids"] == [4, 5]
    assert atif["final_metrics"]["total_prompt_tokens"] == 3
    chat = convert(tmp_path / "ep.jsonl", "openai")
    assert [m["role"] for m in chat["messages"]] == ["system", "user", "assistant", "tool",
                                                     "assistant"]
    with pytest.raises(UsageError, match="format"):
        convert(path, "yaml")
