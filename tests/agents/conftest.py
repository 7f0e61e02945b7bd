"""Fixtures for the agent and eval tests: a tiny two-task suite and a stand-in chat model.

Docker gating comes from the ``docker`` marker (tests/conftest.py)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from repogym.repo import snapshot_commit
from repogym.schema import Task

OPS = "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n\n\n" \
      "def mul(a, b):\n    return a + b\n"
TEST_SUB = "from calc.ops import sub\n\n\ndef test_sub():\n    assert sub(5, 3) == 2\n"
FIXES = {"add": ("return a - b\n\n\ndef sub", "return a + b\n\n\ndef sub"),
         "mul": ("return a + b\n", "return a * b\n")}
NEW_TESTS = {"add": "from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
             "mul": "from calc.ops import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n"}


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True,
                          text=True).stdout


def _diff(repo: Path, path: str, text: str) -> str:
    """The git diff that writes ``text`` to ``path`` (then the change is undone)."""
    target = repo / path
    old = target.read_text() if target.exists() else None
    target.write_text(text)
    _git(repo, "add", "-A")
    diff = _git(repo, "diff", "--cached")
    _git(repo, "reset", "-q", "--hard")
    if old is None and target.exists():
        target.unlink()
    return diff


def make_tasks(root: Path) -> list[Task]:
    """Two tasks (fix ``add``, fix ``mul``) on one small repository, so one image."""
    src = root / "calc-src"
    (src / "calc").mkdir(parents=True)
    (src / "tests").mkdir()
    (src / "calc" / "__init__.py").write_text("")
    (src / "calc" / "ops.py").write_text(OPS)
    (src / "tests" / "test_ops.py").write_text(TEST_SUB)
    scratch = root / "calc-git"
    subprocess.run(["cp", "-r", str(src), str(scratch)], check=True)
    _git(scratch, "init", "-q")
    _git(scratch, "add", "-A")
    _git(scratch, "commit", "-q", "-m", "base")
    base = snapshot_commit(src)
    tasks = []
    for name, (old, new) in FIXES.items():
        tasks.append(Task(
            instance_id=f"calc__{name}", repo="example/calc", base_commit=base,
            problem_statement=f"`calc.ops.{name}` gives the wrong result; fix it.",
            patch=_diff(scratch, "calc/ops.py", OPS.replace(old, new)),
            test_patch=_diff(scratch, f"tests/test_{name}.py", NEW_TESTS[name]),
            FAIL_TO_PASS=(f"tests/test_{name}.py::test_{name}",),
            PASS_TO_PASS=("tests/test_ops.py::test_sub",), source=str(src),
            kind="swe" if name == "add" else "synthetic"))
    return tasks


@pytest.fixture(scope="session")
def calc_tasks(tmp_path_factory: pytest.TempPathFactory) -> list[Task]:
    return make_tasks(tmp_path_factory.mktemp("calc"))


# --- a stand-in for an OpenAI-compatible endpoint ----------------------------------------------


def tool_reply(name: str, arguments: dict[str, Any], call_id: str, tokens: int = 50
               ) -> dict[str, Any]:
    call = {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return _completion(message, "tool_calls", tokens)


def text_reply(content: str, tokens: int = 50) -> dict[str, Any]:
    return _completion({"role": "assistant", "content": content}, "stop", tokens)


def _completion(message: dict[str, Any], finish: str, tokens: int) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion", "model": "scripted",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": tokens - 10, "completion_tokens": 10,
                      "total_tokens": tokens}}


@dataclass
class ChatServer:
    """A real HTTP server on 127.0.0.1 whose "model" answers from a script: each entry is a
    reply body, or ``(status, body)``. Every request is kept for the test to inspect."""

    base_url: str
    script: list[Any] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    tool = staticmethod(tool_reply)
    text = staticmethod(text_reply)

    def next_reply(self, request: dict[str, Any]) -> tuple[int, Any]:
        with self.lock:
            self.requests.append(request)
            if not self.script:
                return 200, tool_reply("submit", {}, f"end{len(self.requests)}")
            entry = self.script.pop(0)
        return entry if isinstance(entry, tuple) else (200, entry)


@pytest.fixture
def chat_server() -> Iterator[ChatServer]:
    server_box: dict[str, ChatServer] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            status, reply = server_box["s"].next_reply(
                {"path": self.path, "headers": dict(self.headers), "body": body})
            data = json.dumps(reply).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server_box["s"] = ChatServer(f"http://127.0.0.1:{httpd.server_address[1]}/v1")
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server_box["s"]
    httpd.shutdown()
    httpd.server_close()
