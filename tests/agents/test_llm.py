"""The llm agent against a stand-in OpenAI-compatible server: real HTTP on 127.0.0.1, a
scripted model that answers with tool calls."""

from __future__ import annotations

import json
from typing import Any

import pytest

from repogym.agents.agent import AgentError
from repogym.agents.llm import LLMAgent, LLMConfig
from repogym.envs.actions import parse_action
from repogym.envs.tools import TOOL_SCHEMAS


def agent(server: Any, **options: Any) -> LLMAgent:
    return LLMAgent(base_url=server.base_url, model="scripted", api_key="sk-test",
                    backoff=0.01, **options)


def test_tool_calls_round_trip_as_openai_messages(chat_server: Any) -> None:
    chat_server.script += [chat_server.tool("bash", {"command": "ls"}, "c1"),
                           chat_server.tool("submit", {}, "c2")]
    llm = agent(chat_server)
    llm.reset("Fix the bug.", {"task_id": "t", "tools": TOOL_SCHEMAS})
    first = parse_action(llm.act("Fix the bug.", {}))
    assert (first.name, first.arguments) == ("bash", {"command": "ls"})
    assert parse_action(llm.act("setup.py\nsrc\n", {"exit_code": 0})).name == "submit"
    one, two = chat_server.requests
    assert one["path"] == "/v1/chat/completions"
    assert one["headers"]["Authorization"] == "Bearer sk-test"
    body = one["body"]
    assert body["model"] == "scripted" and body["tools"] == TOOL_SCHEMAS
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert body["messages"][1]["content"] == "Fix the bug."
    later = two["body"]["messages"]
    assert [m["role"] for m in later] == ["system", "user", "assistant", "tool"]
    assert later[2]["tool_calls"][0]["id"] == "c1"
    assert later[3] == {"role": "tool", "tool_call_id": "c1", "content": "setup.py\nsrc\n"}


def test_text_replies_go_to_the_env_as_text(chat_server: Any) -> None:
    text = 'Let me look.\n<tool_call>{"name": "view", "arguments": {"path": "."}}</tool_call>'
    chat_server.script.append(chat_server.text(text))
    llm = agent(chat_server)
    llm.reset("Fix it.", {"tools": TOOL_SCHEMAS})
    action = llm.act("Fix it.", {})
    assert action == text and parse_action(action).name == "view"
    llm.act("listing", {})
    last = chat_server.requests[-1]["body"]["messages"]
    assert last[-2] == {"role": "assistant", "content": text}
    assert last[-1] == {"role": "user", "content": "listing"}


def test_step_and_token_limits_end_in_submit(chat_server: Any) -> None:
    chat_server.script += [chat_server.tool("bash", {"command": "ls"}, f"c{i}") for i in range(5)]
    llm = agent(chat_server, max_steps=2)
    llm.reset("p", {"tools": TOOL_SCHEMAS})
    actions = [llm.act("obs", {}) for _ in range(3)]
    assert actions[2] == {"tool": "submit"} and llm.stop_reason == "max_steps=2"
    assert len(chat_server.requests) == 2
    chat_server.script[:] = [chat_server.tool("bash", {"command": "ls"}, "c", tokens=150)]
    llm = agent(chat_server, max_total_tokens=100)
    llm.reset("p", {"tools": TOOL_SCHEMAS})
    assert parse_action(llm.act("p", {})).name == "bash"
    assert llm.act("obs", {}) == {"tool": "submit"}
    assert llm.tokens == 150 and llm.stop_reason == "max_total_tokens=100"


def test_rate_limits_are_retried_and_auth_errors_are_not(chat_server: Any) -> None:
    chat_server.script += [(429, {"error": "slow down"}), (503, {"error": "busy"}),
                           chat_server.tool("submit", {}, "c1")]
    llm = agent(chat_server, retries=2)
    llm.reset("p", {"tools": TOOL_SCHEMAS})
    assert parse_action(llm.act("p", {})).name == "submit"
    assert len(chat_server.requests) == 3
    chat_server.script.append((401, {"error": {"message": "bad key"}}))
    llm.reset("p", {"tools": TOOL_SCHEMAS})
    with pytest.raises(AgentError, match="HTTP 401.*bad key"):
        llm.act("p", {})
    assert len(chat_server.requests) == 4


def test_an_endpoint_that_stays_down_is_an_agent_error(chat_server: Any) -> None:
    chat_server.script += [(500, {"error": "down"})] * 2
    llm = agent(chat_server, retries=1)
    llm.reset("p", {"tools": TOOL_SCHEMAS})
    with pytest.raises(AgentError, match="after 2 tries"):
        llm.act("p", {})


def test_configuration_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:9/v1")
    monkeypatch.setenv("REPOGYM_LLM_MODEL", "qwen")
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    config = LLMConfig()
    assert (config.base_url, config.model, config.api_key) == ("http://localhost:9/v1", "qwen",
                                                               "k")
    assert LLMConfig(model="other").model == "other"
    monkeypatch.delenv("REPOGYM_LLM_MODEL")
    with pytest.raises(ValueError, match="REPOGYM_LLM_MODEL"):
        LLMConfig()


def test_long_observations_keep_head_and_tail(chat_server: Any) -> None:
    chat_server.script += [chat_server.tool("bash", {"command": "ls"}, "c1")] * 2
    llm = agent(chat_server, max_observation_chars=100)
    llm.reset("p", {"tools": TOOL_SCHEMAS})
    llm.act("p", {})
    llm.act("A" * 60 + "B" * 200 + "C" * 60, {})
    sent = json.dumps(chat_server.requests[-1]["body"]["messages"][-1]["content"])
    assert sent.startswith('"' + "A" * 50) and sent.endswith("C" * 50 + '"')
    assert "characters cut" in sent
