"""The scripted model behind the gateway (`repogym gateway --scripted gold`, #35): the gateway,
harness and trainer paths tried with no model."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from repogym.agents.gateway import Gateway, read_calls
from repogym.agents.gateway.scripted import FINISH_COMMAND, ScriptedModel, ScriptedServer
from repogym.repo import export_tree
from repogym.schema import Task
from repogym.suite import load_suite

TOOLS = [{"type": "function", "function": {"name": name, "parameters": {}}}
         for name in ("bash", "submit")]


def _task(task_id: str) -> Task:
    return next(t for t in load_suite("demo") if t.instance_id == task_id)


def _post(url: str, body: dict[str, Any]) -> tuple[int, Any]:
    request = urllib.request.Request(f"{url}/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            raw = response.read().decode()
            status = response.status
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())
    if body.get("stream"):
        return status, [json.loads(line[6:]) for line in raw.splitlines()
                        if line.startswith("data: {")]
    return status, json.loads(raw)


def _conversation(task: Task, turns: int) -> list[dict[str, Any]]:
    messages = [{"role": "system", "content": "You are a careful engineer."},
                {"role": "user", "content": f"<pr_description>\n{task.problem_statement}\n"
                                            "</pr_description>"}]
    for n in range(turns):
        messages += [{"role": "assistant", "content": f"step {n}"},
                     {"role": "user", "content": "output"}]
    return messages


def test_the_gold_script_through_the_recording_gateway(tmp_path: Path) -> None:
    task = _task("demo__textkit-1")
    model = ScriptedModel.from_name("gold", load_suite("demo"))
    with ScriptedServer(model) as upstream, Gateway(upstream.base_url, tmp_path) as gateway:
        url = gateway.session_url("ep-1")
        status, first = _post(url, {"model": "gold", "messages": _conversation(task, 0),
                                    "tools": TOOLS, "return_token_ids": True, "logprobs": True})
        assert status == 200
        call = first["choices"][0]["message"]["tool_calls"][0]["function"]
        assert call["name"] == "bash" and task.patch in json.loads(call["arguments"])["command"]
        _, again = _post(url, {"model": "gold", "messages": _conversation(task, 0),
                               "tools": TOOLS})
        assert again["choices"][0]["message"] == first["choices"][0]["message"]  # no state
        _, second = _post(url, {"model": "gold", "messages": _conversation(task, 1),
                                "tools": TOOLS})
        assert second["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "submit"
        _, bash_only = _post(url, {"model": "gold", "messages": _conversation(task, 1),
                                   "tools": TOOLS[:1]})
        finish = bash_only["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
        assert json.loads(finish) == {"command": FINISH_COMMAND}
        _, text = _post(url, {"model": "gold", "messages": _conversation(task, 1)})
        assert '<tool_call>{"name": "submit", "arguments": {}}</tool_call>' in (
            text["choices"][0]["message"]["content"])
        status, chunks = _post(url, {"model": "gold", "messages": _conversation(task, 0),
                                     "tools": TOOLS, "stream": True})
        assert status == 200 and chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
        status, refused = _post(url, {"model": "gold", "messages": [
            {"role": "user", "content": "write me a poem"}]})
        assert status == 400 and "no task's problem statement" in refused["error"]["message"]
        calls = read_calls(gateway.calls_path("ep-1"))
    assert [c["status"] for c in calls] == [200] * 6 + [400]
    assert calls[0]["completion_token_ids"] and len(calls[0]["logprobs"]) == len(
        calls[0]["completion_token_ids"])


def test_the_first_reply_applies_the_gold_patch_in_a_checkout(tmp_path: Path) -> None:
    """What the scripted model sends is a command that works: run in the task's repository
    at its base commit, it leaves exactly the gold patch as the diff."""
    task = _task("demo__stockroom-1")
    model = ScriptedModel.from_name("gold", [task])
    status, reply = model.completion({"messages": _conversation(task, 0), "tools": TOOLS})
    assert status == 200
    command = json.loads(reply["choices"][0]["message"]["tool_calls"][0]["function"][
        "arguments"])["command"]
    repo = tmp_path / "repo"
    export_tree(task.source or "", task.base_commit, repo)
    git = ["git", "-c", "user.name=a", "-c", "user.email=a@b"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "-A"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "base"], cwd=repo, check=True)
    done = subprocess.run(["bash", "-c", command], cwd=repo, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    diff = subprocess.run(["git", "diff", "--stat"], cwd=repo, capture_output=True, text=True)
    changed = {line.split("|")[0].strip() for line in diff.stdout.splitlines() if "|" in line}
    assert changed == {p.split(" b/")[-1] for p in task.patch.splitlines()
                       if p.startswith("diff --git")}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_until_it_answers(server: subprocess.Popen[str], port: int) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/s/check/v1/models", timeout=5)
            return
        except (urllib.error.URLError, ConnectionError):
            assert server.poll() is None and time.monotonic() < deadline, server.stdout
            time.sleep(0.3)


@pytest.mark.docker
def test_the_scripted_gateway_resolves_a_task_for_the_llm_agent(tmp_path: Path) -> None:
    """The command, a real episode in Docker, the llm agent speaking to it as to any endpoint;
    Ctrl-C then stops the gateway with exit status 130."""
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "repogym", "gateway", "--scripted", "gold", "--suite", "demo",
         "--port", str(port), "--record-dir", str(tmp_path / "calls")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _wait_until_it_answers(server, port)
        env = {**os.environ, "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/s/eval/v1",
               "REPOGYM_LLM_MODEL": "gold"}
        run = subprocess.run(
            [sys.executable, "-m", "repogym", "eval", "--suite", "demo", "--agent", "llm",
             "--task", "demo__minicalc-1", "--workers", "1", "--out", str(tmp_path / "run")],
            env=env, capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stdout + run.stderr
        row = json.loads((tmp_path / "run/results.jsonl").read_text().splitlines()[0])
        assert row["resolved"] and row["steps"] == 2, row
        assert len(read_calls(tmp_path / "calls/eval.calls.jsonl")) == 2
    finally:
        server.send_signal(signal.SIGINT)
        out, _ = server.communicate(timeout=30)
    assert server.returncode == 130, out


def test_ctrl_c_is_an_interruption_also_for_a_gateway_started_in_the_background(
        tmp_path: Path) -> None:
    """A job a shell starts in the background inherits SIGINT ignored; uvicorn still stops on
    it, and raised it again after, which then did nothing: the command ended with status 0, as
    if nothing had stopped it (a CI run started in the background failed on it)."""
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "repogym", "gateway", "--scripted", "gold", "--suite", "demo",
         "--port", str(port), "--record-dir", str(tmp_path / "calls")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        _wait_until_it_answers(server, port)
    finally:
        server.send_signal(signal.SIGINT)
        out, _ = server.communicate(timeout=30)
    assert server.returncode == 130, out
