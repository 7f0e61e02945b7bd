"""A scripted model: an OpenAI-compatible server that plays each task's gold solution.

To try the gateway, a harness or a trainer's rollout path with no model at all::

    repogym gateway --scripted gold --suite demo --port 8100

serves it behind the recording gateway (``http://127.0.0.1:8100/s/EPISODE/v1``). From Python,
``with ScriptedServer(ScriptedModel.gold(tasks)) as server:`` gives ``server.base_url``.

The reply to a conversation depends on the conversation alone, so concurrent episodes never
share state: the task is the one whose problem statement a user message holds, and the turn is
the number of assistant messages so far.

- Turn 1: a ``bash`` call that writes the gold patch to a file outside the repository and
  applies it with ``git apply`` (as the ``gold`` agent does through the environment's tools).
- Turn 2 and later: a ``submit`` call when the request offers a ``submit`` tool (repogym's own
  tools); otherwise the command mini-swe-agent's prompt asks for to finish
  (:data:`FINISH_COMMAND`), since harnesses that offer only ``bash`` end on a command.
- Without ``tools`` in the request, the call is written in the text as one
  ``<tool_call>{...}</tool_call>`` block, the chat convention ``env.step`` reads.

Like vLLM, it returns token ids and logprobs when asked (``return_token_ids``, ``logprobs``): a
token is one UTF-8 byte of the text, plus 3 (ByT5's ids), with made-up logprobs. ``"stream":
true`` gets server-sent events. A conversation that holds no task's statement gets HTTP 400
that says so.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from repogym.schema import Task

FINISH_COMMAND = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached"
SCRIPTS = ("gold",)  # the names --scripted takes
_KEY_CHARS = 120  # how much of a problem statement identifies its task


def byte_ids(text: str) -> list[int]:
    return [b + 3 for b in text.encode("utf-8")]


def _logprob(i: int) -> float:
    return -round(0.01 * (1 + i % 7), 4)


def _words(text: str) -> str:
    return " ".join(text.split())


def gold_command(task: Task) -> str:
    """One shell command that applies the task's gold patch in the repository."""
    patch = task.patch if task.patch.endswith("\n") else task.patch + "\n"
    end = "REPOGYM_GOLD_PATCH"
    while end in patch:
        end += "_"
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in task.instance_id)
    path = f"/tmp/repogym-gold-{name}.patch"  # the same reply to the same conversation
    return (f"cat > {path} <<'{end}'\n{patch}{end}\n"
            f"git apply --whitespace=nowarn {path} && rm -f {path} && git diff --stat")


@dataclass(frozen=True)
class ScriptedModel:
    """Replies by script: ``script(task, turn, tool_names)`` gives (thought, tool, arguments)."""

    name: str
    tasks: tuple[Task, ...]

    @classmethod
    def from_name(cls, name: str, tasks: Sequence[Task]) -> ScriptedModel:
        if name not in SCRIPTS:
            raise ValueError(f"--scripted {name!r}: the scripted models are {', '.join(SCRIPTS)}")
        with_patch = tuple(t for t in tasks if t.patch.strip())
        if not with_patch:
            raise ValueError("the scripted model needs tasks with a gold patch; the suite has "
                             "none")
        return cls(name, with_patch)

    def task_of(self, messages: list[dict[str, Any]]) -> Task | None:
        said = _words(" ".join(str(m.get("content") or "") for m in messages
                               if m.get("role") in ("user", "system")))
        found = [t for t in self.tasks if _words(t.problem_statement)[:_KEY_CHARS] in said]
        return max(found, key=lambda t: len(t.problem_statement), default=None)

    def step(self, task: Task, turn: int, tools: set[str]) -> tuple[str, str, dict[str, Any]]:
        if turn == 0:
            return ("Applying the reference fix.", "bash", {"command": gold_command(task)})
        if "submit" in tools or not tools:
            return ("The fix is in place; submitting.", "submit", {})
        return ("The fix is in place; finishing.", "bash", {"command": FINISH_COMMAND})

    def completion(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON body) for a chat completions request."""
        messages = body.get("messages") or []
        task = self.task_of(messages)
        if task is None:
            return 400, {"error": {
                "type": "invalid_request_error", "code": "no_task",
                "message": f"the scripted model {self.name!r} found no task's problem statement "
                           f"in this conversation: it plays the gold solutions of {len(self.tasks)}"
                           " tasks, found by the statement in a user message; start the gateway "
                           "with the suite the harness runs (--suite)"}}
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        tools = {str((t.get("function") or {}).get("name")) for t in body.get("tools") or []}
        thought, tool, arguments = self.step(task, turn, tools)
        text_args = json.dumps(arguments)
        message: dict[str, Any] = {"role": "assistant", "content": thought}
        if tools:
            message["tool_calls"] = [{"id": f"call_{turn}", "type": "function",
                                      "function": {"name": tool, "arguments": text_args}}]
            finish = "tool_calls"
        else:
            call = json.dumps({"name": tool, "arguments": arguments})
            message["content"] = f"{thought}\n<tool_call>{call}</tool_call>"
            finish = "stop"
        prompt_ids = byte_ids(json.dumps(messages, sort_keys=True))
        completion_ids = byte_ids(str(message["content"]) + (text_args if tools else ""))
        choice: dict[str, Any] = {"index": 0, "finish_reason": finish, "message": message}
        if body.get("return_token_ids"):
            choice["token_ids"] = completion_ids
        if body.get("logprobs"):
            choice["logprobs"] = {"content": [
                {"token": f"<{t}>", "logprob": _logprob(i), "bytes": [t - 3], "top_logprobs": []}
                for i, t in enumerate(completion_ids)]}
        reply: dict[str, Any] = {
            "id": f"chatcmpl-{self.name}-{turn}", "object": "chat.completion", "created": 0,
            "model": body.get("model") or self.name, "choices": [choice],
            "usage": {"prompt_tokens": len(prompt_ids), "completion_tokens": len(completion_ids),
                      "total_tokens": len(prompt_ids) + len(completion_ids)}}
        if body.get("return_token_ids"):
            reply["prompt_token_ids"] = prompt_ids
        return 200, reply


def stream_chunks(reply: dict[str, Any], include_usage: bool) -> list[dict[str, Any]]:
    """A completion as server-sent chunks: the role, the content, the call, the finish."""
    choice = reply["choices"][0]
    message = choice["message"]
    base = {"id": reply["id"], "object": "chat.completion.chunk", "created": 0,
            "model": reply["model"]}
    first: dict[str, Any] = {**base, "choices": [
        {"index": 0, "delta": {"role": "assistant", "content": message["content"]},
         "finish_reason": None}]}
    if "prompt_token_ids" in reply:
        first["prompt_token_ids"] = reply["prompt_token_ids"]
    if "token_ids" in choice:
        first["choices"][0]["token_ids"] = choice["token_ids"]
    if "logprobs" in choice:
        first["choices"][0]["logprobs"] = choice["logprobs"]
    chunks = [first]
    for n, call in enumerate(message.get("tool_calls") or []):
        chunks.append({**base, "choices": [{"index": 0, "finish_reason": None, "delta": {
            "tool_calls": [{"index": n, **call}]}}]})
    chunks.append({**base, "choices": [{"index": 0, "delta": {},
                                        "finish_reason": choice["finish_reason"]}]})
    if include_usage:
        chunks.append({**base, "choices": [], "usage": reply["usage"]})
    return chunks


class ScriptedServer:
    """The model on a loopback port in a background thread; a context manager."""

    def __init__(self, model: ScriptedModel, host: str = "127.0.0.1", port: int = 0) -> None:
        self.model = model
        self.httpd = ThreadingHTTPServer((host, port), _handler(model))
        self.httpd.daemon_threads = True
        self.base_url = f"http://{host}:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, args=(0.1,),
                                        daemon=True, name="scripted-model")

    def __enter__(self) -> ScriptedServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> ScriptedServer:
        return self.__enter__()

    def close(self) -> None:
        if self._thread.is_alive():
            self.httpd.shutdown()
        self.httpd.server_close()


def _handler(model: ScriptedModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
            if self.path.rstrip("/").endswith("/models"):
                return self._json(200, {"object": "list", "data": [
                    {"id": model.name, "object": "model", "owned_by": "repogym"}]})
            self._json(404, {"error": {"message": f"no route {self.path}: POST "
                                                  "/v1/chat/completions", "type": "not_found"}})

        def do_POST(self) -> None:  # noqa: N802
            if not self.path.rstrip("/").endswith("/chat/completions"):
                return self._json(404, {"error": {"message": f"no route {self.path}: POST "
                                                  "/v1/chat/completions", "type": "not_found"}})
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            except ValueError as exc:
                return self._json(400, {"error": {"message": f"the body is not JSON: {exc}",
                                                  "type": "invalid_request_error"}})
            status, reply = model.completion(body if isinstance(body, dict) else {})
            if status != 200 or not body.get("stream"):
                return self._json(status, reply)
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            self._stream(stream_chunks(reply, usage))

        def _json(self, status: int, data: dict[str, Any]) -> None:
            raw = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def _stream(self, chunks: list[dict[str, Any]]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for chunk in [*(f"data: {json.dumps(c)}\n\n" for c in chunks), "data: [DONE]\n\n"]:
                data = chunk.encode()
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        def log_message(self, *args: Any) -> None:
            pass  # the gateway in front records every call

    return Handler
