"""A deterministic OpenAI-compatible server for tests: real HTTP on 127.0.0.1, no model.

It plays a fixed solution: the reply to a conversation is the next command of the script whose
key appears in the first user message, chosen by how many assistant turns the conversation
already holds. So the same conversation always gets the same reply, and concurrent
conversations never share state. Like vLLM it returns token ids and logprobs when asked
(``return_token_ids``, ``logprobs``): a token is a UTF-8 byte of the text plus 3 (ByT5's ids).

The model name picks a behaviour: ``fake-error`` answers HTTP 429 with an OpenAI error body;
``fake-slow`` waits ``slow_seconds`` before answering. ``"stream": true`` streams server-sent
events the way vLLM does (the first chunk carries ``prompt_token_ids``, every chunk its
``token_ids``).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

RATE_LIMITED = {"error": {"message": "Rate limit reached for fake-error", "type": "requests",
                          "code": "rate_limit_exceeded"}}


def byte_ids(text: str) -> list[int]:
    return [b + 3 for b in text.encode("utf-8")]


def logprob(i: int) -> float:
    return -round(0.01 * (1 + i % 7), 4)


@dataclass
class FakeOpenAI:
    """The server's script and what it saw. ``base_url`` ends in ``/v1``."""

    scripts: dict[str, list[str]] = field(default_factory=dict)  # prompt key -> bash commands
    slow_seconds: float = 5.0
    base_url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def reply_command(self, messages: list[dict[str, Any]]) -> str:
        first_user = next((str(m.get("content")) for m in messages if m.get("role") == "user"), "")
        script = next((s for key, s in self.scripts.items() if key in first_user), None)
        if script is None:
            return "echo no script for this task"
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        return script[min(turn, len(script) - 1)]

    def completion(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages") or []
        command = self.reply_command(messages)
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        thought = f"Step {turn + 1}: running a command."
        arguments = json.dumps({"command": command})
        call = {"id": f"call_{turn}", "type": "function",
                "function": {"name": "bash", "arguments": arguments}}
        prompt_ids = byte_ids(json.dumps(messages, sort_keys=True))
        completion_ids = byte_ids(thought + arguments)
        choice: dict[str, Any] = {
            "index": 0, "finish_reason": "tool_calls",
            "message": {"role": "assistant", "content": thought, "tool_calls": [call]}}
        if body.get("return_token_ids"):
            choice["token_ids"] = completion_ids
        if body.get("logprobs"):
            choice["logprobs"] = {"content": [
                {"token": f"<{t}>", "logprob": logprob(i), "bytes": [t - 3], "top_logprobs": []}
                for i, t in enumerate(completion_ids)]}
        reply: dict[str, Any] = {
            "id": f"chatcmpl-fake-{turn}", "object": "chat.completion", "created": 0,
            "model": body.get("model", "fake"), "choices": [choice],
            "usage": {"prompt_tokens": len(prompt_ids), "completion_tokens": len(completion_ids),
                      "total_tokens": len(prompt_ids) + len(completion_ids)}}
        if body.get("return_token_ids"):
            reply["prompt_token_ids"] = prompt_ids
        return reply

    def chunks(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        """The same completion as vLLM would stream it (content and arguments in pieces)."""
        full = self.completion(body)
        choice = full["choices"][0]
        message, ids = choice["message"], choice.get("token_ids") or []
        lps = (choice.get("logprobs") or {}).get("content") or []
        base = {"id": full["id"], "object": "chat.completion.chunk", "created": 0,
                "model": full["model"]}
        first: dict[str, Any] = {**base, "choices": [
            {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}
        if "prompt_token_ids" in full:
            first["prompt_token_ids"] = full["prompt_token_ids"]
        out, pos = [first], 0
        arguments = message["tool_calls"][0]["function"]["arguments"]
        pieces = [("content", message["content"])] + [
            ("arguments", arguments[i:i + 16]) for i in range(0, len(arguments), 16)]
        for n, (kind, text) in enumerate(pieces):
            width = len(text.encode("utf-8"))
            delta: dict[str, Any] = {"content": text} if kind == "content" else {"tool_calls": [
                {"index": 0, "function": {"arguments": text},
                 **({"id": "call_stream", "type": "function", "function": {
                     "name": "bash", "arguments": text}} if n == 1 else {})}]}
            chunk: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": None}
            if ids:
                chunk["token_ids"] = ids[pos:pos + width]
            if lps:
                chunk["logprobs"] = {"content": lps[pos:pos + width]}
            pos += width
            out.append({**base, "choices": [chunk]})
        out.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
        if (body.get("stream_options") or {}).get("include_usage"):
            out.append({**base, "choices": [], "usage": full["usage"]})
        return out


def start_fake_openai(server: FakeOpenAI) -> ThreadingHTTPServer:
    """Serves ``server`` on a free loopback port (sets ``server.base_url``); shut it down after."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
            self._json(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            with server.lock:
                server.requests.append({"path": self.path, "body": body,
                                        "headers": dict(self.headers)})
            model = body.get("model", "")
            if model.endswith("fake-error"):
                return self._json(429, RATE_LIMITED)
            if model.endswith("fake-slow"):
                time.sleep(server.slow_seconds)
            if body.get("stream"):
                return self._stream(server.chunks(body))
            self._json(200, server.completion(body))

        def _json(self, status: int, data: dict[str, Any]) -> None:
            raw = json.dumps(data).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the caller gave up waiting (the timeout test): nobody to answer

        def _stream(self, chunks: list[dict[str, Any]]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for chunk in chunks:
                self._chunk(f"data: {json.dumps(chunk)}\n\n".encode())
            self._chunk(b"data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    server.base_url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
    return httpd
