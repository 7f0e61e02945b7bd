"""Statements from what the tests observed; a model's issue, thrown away when it quotes the
hidden tests (a real HTTP server on localhost plays the model)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest

from repogym.schema import Task
from repogym.tasks.sources.statement_model import LLMConfig
from repogym.tasks.sources.statements import facts, facts_statement, hidden_lines, written

TEST_PATCH = """\
diff --git a/tests/test_window.py b/tests/test_window.py
--- a/tests/test_window.py
+++ b/tests/test_window.py
@@ -1,2 +1,6 @@
+def test_unique_in_window():
+    assert list(unique_in_window([1, 2, 1, 3], 2)) == [1, 2, 3]
"""
OBSERVED = {
    "collection": {"tests/test_window.py": {
        "when": "collect",
        "message": "ImportError: cannot import name 'unique_in_window' from 'pkg'"}},
    "tests": {"tests/test_w.py::test_windowed": {
        "failure": {"when": "call",
                    "message": "AssertionError: assert [(1, 2, None)] == [(1, 2)]\n"
                               "    assert list(unique_in_window([1, 2, 1, 3], 2)) == [1, 2, 3]"},
        "calls": ["pkg/more.py:10:windowed", "pkg/more.py:30:_helper"]}},
}


def _task() -> Task:
    return Task(instance_id="pkg-1", repo="o/pkg", base_commit="0" * 40,
                problem_statement="Add unique_in_window", test_patch=TEST_PATCH,
                FAIL_TO_PASS=("tests/test_window.py::test_unique_in_window",),
                extra={"observed": OBSERVED})


def test_a_statement_from_observations_quotes_no_test_line() -> None:
    task = _task()
    files = {"pkg/__init__.py": "from .more import *\n"}
    found = facts(task, files.get)
    assert [f.when for f in found] == ["collect", "call"]
    assert found[1].calls == ("pkg.windowed",)  # private helpers are left out
    hidden = hidden_lines(task, files)
    assert hidden == ["assert list(unique_in_window([1, 2, 1, 3], 2)) == [1, 2, 3]"]
    text = facts_statement(task, found, context=task.problem_statement, hidden=hidden)
    assert text.startswith("## Add unique_in_window")
    assert "cannot import name 'unique_in_window'" in text
    assert "assert [(1, 2, None)] == [(1, 2)]" in text and "`pkg.windowed`" in text
    assert "unique_in_window([1, 2, 1, 3], 2)" not in text  # the quoted test line is out
    assert "test_unique_in_window" not in text


def test_what_is_missing_heads_the_statement_and_alike_failures_are_told_once() -> None:
    message = "AttributeError: module 'pkg' has no attribute 'unique_in_window'"
    observed = {"tests": {f"tests/test_w.py::test_{i}": {
        "failure": {"when": "call", "message": message}, "calls": []} for i in range(3)}}
    observed["tests"]["tests/test_w.py::test_gray"] = {"failure": {
        "when": "call",
        "message": "TypeError: gray_product() got an unexpected keyword argument 'repeat'"},
        "calls": []}
    task = _task().with_(extra={"observed": observed})
    text = facts_statement(task, facts(task, {}.get), context="Add unique_in_window")
    assert "`pkg.unique_in_window` does not exist; `gray_product` takes no argument `repeat`." \
        in text
    assert "1. 3 checks fail alike:" in text and text.count(message) == 1
    assert "2. A check fails:" in text


class Model(BaseHTTPRequestHandler):
    answer = ""
    seen: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 (the http.server API)
        Model.seen.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        data = json.dumps({"choices": [{"message": {"content": Model.answer}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture()
def model() -> Iterator[LLMConfig]:
    httpd = HTTPServer(("127.0.0.1", 0), Model)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    Model.seen.clear()
    yield LLMConfig(base_url=f"http://127.0.0.1:{httpd.server_address[1]}/v1", model="tiny")
    httpd.shutdown()
    httpd.server_close()


def test_a_model_writes_the_issue_from_the_same_facts(model: LLMConfig) -> None:
    task = _task()
    hidden = hidden_lines(task, {})
    fallback = facts_statement(task, facts(task, {}.get), context=task.problem_statement,
                               hidden=hidden)
    Model.answer = "Importing `unique_in_window` from pkg fails; I expected it to exist."
    text, author = written(model, fallback, hidden, lambda _m: None)
    assert (text, author) == (Model.answer, "llm")
    prompt = Model.seen[0]["messages"][1]["content"]
    assert "cannot import name 'unique_in_window'" in prompt  # the facts...
    assert "unique_in_window([1, 2, 1, 3], 2)" not in prompt  # ...and never the tests


def test_a_model_that_quotes_the_hidden_tests_is_not_used(model: LLMConfig) -> None:
    task = _task()
    hidden = hidden_lines(task, {})
    warnings: list[str] = []
    Model.answer = ("It should hold that\n\n    assert list(unique_in_window([1, 2, 1, 3], 2))"
                    " == [1, 2, 3]")
    text, author = written(model, "the facts", hidden, warnings.append)
    assert (text, author) == ("the facts", "tests")
    assert "quotes the hidden tests" in warnings[0]
