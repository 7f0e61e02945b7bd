"""The recording gateway against a fake OpenAI-compatible server over real loopback HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from fake_openai import RATE_LIMITED, FakeOpenAI, byte_ids, start_fake_openai

from repogym.agents.gateway import Gateway, read_calls
from repogym.agents.gateway.completions import assemble, parse_sse

pytest.importorskip("starlette")


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI(scripts={"task A": ["ls", "echo a"], "task B": ["pwd", "echo b"]},
                        slow_seconds=3.0)
    httpd = start_fake_openai(server)
    yield server
    httpd.shutdown()
    httpd.server_close()


def _ask(url: str, task: str, model: str = "m", **body: object) -> httpx.Response:
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": task}]
    return httpx.post(f"{url}/chat/completions", timeout=30,
                      json={"model": model, "messages": messages, **body})


def test_calls_are_recorded_with_token_ids(fake: FakeOpenAI, tmp_path: Path) -> None:
    with Gateway(fake.base_url, tmp_path, token_ids=True) as gw:
        reply = _ask(gw.session_url("ep1"), "task A", tools=[{"type": "function", "function": {
            "name": "bash", "parameters": {"type": "object"}}}])
        calls = gw.calls("ep1")
    assert reply.status_code == 200
    message = reply.json()["choices"][0]["message"]
    assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == {"command": "ls"}
    [call] = calls
    assert call["status"] == 200 and call["error"] is None and call["latency_s"] > 0
    assert call["request"]["messages"][1]["content"] == "task A"
    assert call["request"]["tools"][0]["function"]["name"] == "bash"
    assert call["response"]["choices"][0]["message"] == message
    assert call["usage"]["completion_tokens"] == len(call["completion_token_ids"])
    assert call["prompt_token_ids"] == reply.json()["prompt_token_ids"]
    assert call["completion_token_ids"] == byte_ids(message["content"] + json.dumps(
        {"command": "ls"}))
    assert len(call["logprobs"]) == len(call["completion_token_ids"])
    # the harness did not ask for token ids: the gateway did, on its behalf
    assert fake.requests[0]["body"]["return_token_ids"] is True


def test_without_token_ids_the_record_says_none(fake: FakeOpenAI, tmp_path: Path) -> None:
    with Gateway(fake.base_url, tmp_path) as gw:
        assert _ask(gw.session_url("ep"), "task A").status_code == 200
        [call] = gw.calls("ep")
    assert call["prompt_token_ids"] is None and call["completion_token_ids"] is None
    assert "return_token_ids" not in fake.requests[0]["body"]


def test_streaming_passes_through_and_is_assembled(fake: FakeOpenAI, tmp_path: Path) -> None:
    with Gateway(fake.base_url, tmp_path, token_ids=True) as gw:
        url = gw.session_url("stream")
        body = {"model": "m", "stream": True, "stream_options": {"include_usage": True},
                "messages": [{"role": "user", "content": "task B"}]}
        with httpx.stream("POST", f"{url}/chat/completions", json=body, timeout=30) as r:
            assert r.headers["content-type"].startswith("text/event-stream")
            raw = b"".join(r.iter_bytes())
        [call] = gw.calls("stream")
    assert raw.rstrip().endswith(b"data: [DONE]")
    harness_view = assemble(parse_sse(raw))  # what an OpenAI client makes of the stream
    arguments = harness_view["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
    assert json.loads(arguments) == {"command": "pwd"}
    assert call["stream"] is True and call["status"] == 200
    assert call["response"]["choices"][0]["message"] == harness_view["choices"][0]["message"]
    assert call["completion_token_ids"] == harness_view["choices"][0]["token_ids"]
    assert len(call["logprobs"]) == len(call["completion_token_ids"]) > 10
    assert call["prompt_token_ids"] and call["usage"]["total_tokens"] > 0


def test_concurrent_sessions_do_not_mix(fake: FakeOpenAI, tmp_path: Path) -> None:
    with Gateway(fake.base_url, tmp_path, token_ids=True) as gw:
        def episode(name: str) -> None:
            for _ in range(5):
                assert _ask(gw.session_url(name), f"task {name}").status_code == 200

        with ThreadPoolExecutor(4) as pool:
            list(pool.map(episode, ["A", "B", "A2", "B2"]))
        for name in ("A", "B"):
            calls = gw.calls(name)
            assert [c["index"] for c in calls] == list(range(5))
            assert all(c["request"]["messages"][1]["content"] == f"task {name}" for c in calls)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "A.calls.jsonl", "A2.calls.jsonl", "B.calls.jsonl", "B2.calls.jsonl"]


def test_upstream_errors_reach_the_harness_as_they_are(fake: FakeOpenAI, tmp_path: Path) -> None:
    openai = pytest.importorskip("openai")
    with Gateway(fake.base_url, tmp_path, timeout=1.0) as gw:
        client = openai.OpenAI(base_url=gw.session_url("err"), api_key="k", max_retries=0)
        messages = [{"role": "user", "content": "task A"}]
        with pytest.raises(openai.RateLimitError) as limited:
            client.chat.completions.create(model="fake-error", messages=messages)
        with pytest.raises(openai.APIStatusError) as slow:
            client.chat.completions.create(model="fake-slow", messages=messages)
        calls = gw.calls("err")
    assert limited.value.status_code == 429
    assert limited.value.body == RATE_LIMITED["error"]  # the upstream's own body, untouched
    assert slow.value.status_code == 504 and "did not answer in time" in str(slow.value)
    assert [c["status"] for c in calls] == [429, 504]
    assert calls[0]["error"]["body"] == RATE_LIMITED
    assert calls[1]["error"]["type"] == "upstream_timeout"


def test_unreachable_upstream_and_bad_requests(tmp_path: Path) -> None:
    with Gateway("http://127.0.0.1:9/v1", tmp_path) as gw:  # the discard port: nothing listens
        down = _ask(gw.session_url("down"), "task A")
        bad = httpx.post(f"{gw.session_url('down')}/chat/completions", content=b"{not json")
        bad_session = httpx.post(f"{gw.url}/s/..%2Fx/v1/chat/completions", json={})
        calls = gw.calls("down")
    assert down.status_code == 502 and down.json()["error"]["type"] == "upstream_unreachable"
    assert bad.status_code == 400 and "messages" in bad.json()["error"]["message"]
    assert bad_session.status_code in (400, 404)
    assert [c["status"] for c in calls] == [502]


def test_records_survive_the_gateway(fake: FakeOpenAI, tmp_path: Path) -> None:
    """Each call is on disk once answered: a new gateway continues the numbering."""
    for _ in range(2):
        with Gateway(fake.base_url, tmp_path) as gw:
            _ask(gw.session_url("s"), "task A")
    assert [c["index"] for c in read_calls(tmp_path / "s.calls.jsonl")] == [0, 1]
