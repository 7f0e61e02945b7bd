"""Problem statements from an OpenAI-compatible endpoint (a real HTTP server on localhost)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest

from repogym.tasks.sources.statement_model import LLMConfig, LLMError, complete, statement


class Endpoint(BaseHTTPRequestHandler):
    """Answers chat completions with a fixed text and remembers what it was sent."""

    answer: Any = "<think>hmm</think>\nThe parser drops the last row."
    seen: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 (the http.server API)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Endpoint.seen.append({"path": self.path, "auth": self.headers.get("Authorization"),
                              "body": body})
        if Endpoint.answer is None:
            self.send_response(500)
            self.end_headers()
            return
        data = json.dumps({"choices": [{"message": {"content": Endpoint.answer}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture()
def server() -> Iterator[str]:
    httpd = HTTPServer(("127.0.0.1", 0), Endpoint)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    Endpoint.seen.clear()
    Endpoint.answer = "<think>hmm</think>\nThe parser drops the last row."
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def test_complete_posts_a_chat_request(server: str) -> None:
    config = LLMConfig(base_url=server, model="tiny", api_key="sk-test")
    assert complete(config, "system text", "user text") == "The parser drops the last row."
    (request,) = Endpoint.seen
    assert request["path"] == "/v1/chat/completions"
    assert request["auth"] == "Bearer sk-test"
    assert request["body"]["model"] == "tiny" and request["body"]["temperature"] == 0
    assert [m["role"] for m in request["body"]["messages"]] == ["system", "user"]


def test_failures_fall_back_to_the_template(server: str) -> None:
    Endpoint.answer = None
    config = LLMConfig(base_url=server, model="tiny")
    with pytest.raises(LLMError, match="--llm-base-url"):
        complete(config, "s", "u")
    warnings: list[str] = []
    assert statement(config, "s", "u", "template", warnings.append) == "template"
    assert warnings and "template" in warnings[0]
    assert statement(None, "s", "u", "template", warnings.append) == "template"


def test_config_from_flags_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_BASE_URL", "REPOGYM_LLM_MODEL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    assert LLMConfig.from_env() is None
    monkeypatch.setenv("OPENAI_BASE_URL", "http://h/v1")
    assert LLMConfig.from_env() is None  # a stray base URL alone configures nothing
    monkeypatch.setenv("REPOGYM_LLM_MODEL", "m")
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    config = LLMConfig.from_env()
    assert config is not None and (config.base_url, config.model, config.api_key) == \
        ("http://h/v1", "m", "k")
    assert "k" not in json.dumps(config.describe())
    monkeypatch.delenv("REPOGYM_LLM_MODEL")
    with pytest.raises(ValueError, match="--llm-model"):
        LLMConfig.from_env(base_url="http://other/v1")
    with pytest.raises(ValueError, match="http"):
        LLMConfig(base_url="ftp://x", model="m")
