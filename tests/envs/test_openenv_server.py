"""`repogym serve`: OpenEnv's server and client over real loopback HTTP/WebSocket, real Docker."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from repogym.sandbox.base import LABEL_MANAGED, LABEL_PID
from repogym.sandbox.client import docker_client
from repogym.suite import load_suite

pytest.importorskip("openenv")
TOKEN = "test-token-7f3a"
TASKS = ("demo__minicalc-2", "demo__stockroom-3")  # the train split: what serve serves


@dataclass
class Served:
    url: str
    pid: int
    log: Path  # what the server printed so far


def _free_port() -> int:
    from repogym.agents.gateway.gateway import bind

    sock = bind("127.0.0.1", 0)
    port = int(sock.getsockname()[1])
    sock.close()
    return port


def _containers(pid: int) -> list[str]:
    rows = docker_client().api.containers(
        all=True, filters={"label": [f"{LABEL_MANAGED}=1", f"{LABEL_PID}={pid}"]})
    return [(r.get("Names") or ["?"])[0] for r in rows]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    port = _free_port()
    env = {**os.environ, "REPOGYM_TOKEN": TOKEN}
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    out = log.open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "repogym", "serve", "--suite", "demo", "--port", str(port),
         "--idle-timeout", "3", "--max-sessions", "4"],
        env=env, stdout=out, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"repogym serve did not start: {log.read_text()}")
        time.sleep(0.5)
    try:
        yield Served(url, proc.pid, log)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        deadline = time.monotonic() + 30
        while _containers(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.5)
        out.close()
        assert not _containers(proc.pid), "the server left containers behind"


@pytest.mark.docker
def test_token_guard_and_hints(served: Served) -> None:
    assert httpx.get(f"{served.url}/health").status_code == 200  # open, says nothing
    missing = httpx.get(f"{served.url}/schema")
    wrong = httpx.get(f"{served.url}/schema", headers={"Authorization": "Bearer nope"})
    assert missing.status_code == wrong.status_code == 401
    assert "Authorization: Bearer TOKEN" in missing.json()["error"]
    ok = httpx.get(f"{served.url}/schema", headers={"Authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 200 and "action" in ok.json()
    stateless = httpx.post(f"{served.url}/reset", json={},
                           headers={"Authorization": f"Bearer {TOKEN}"})
    assert stateless.status_code == 400 and "/ws" in stateless.json()["error"]
    from repogym.envs.openenv.remote import RepogymEnvClient

    # #35: OpenEnv's client saw only "HTTP 401"; it is told what to send
    with pytest.raises(Exception, match="missing or wrong token: send 'Authorization: Bearer"):
        with RepogymEnvClient(served.url, token="nope").sync() as client:
            client.reset()
    # whichever frame a client reads first, the error's or the close's, says the same
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    with connect(served.url.replace("http://", "ws://") + "/ws", open_timeout=30) as ws:
        said = json.loads(ws.recv(timeout=30))["data"]["message"]
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=30)
    assert closed.value.rcvd is not None and said == closed.value.rcvd.reason
    assert said.startswith("missing or wrong token: send 'Authorization: Bearer")
    assert _containers(served.pid) == []  # nothing of the environment ran for it


@pytest.mark.docker
def test_a_client_that_disconnects_is_one_line_of_the_log(served: Served) -> None:
    """#35: a client that went away printed two long ASGI tracebacks (ClientDisconnected,
    WebSocketDisconnect); a disconnect is normal."""
    from websockets.sync.client import connect

    before = served.log.read_text().count("the client disconnected")
    url = served.url.replace("http://", "ws://") + "/ws"
    with connect(url, additional_headers={"Authorization": f"Bearer {TOKEN}"},
                 open_timeout=30) as ws:
        ws.send(json.dumps({"type": "reset", "data": {"task_id": TASKS[0]}}))
        assert json.loads(ws.recv(timeout=120))["type"] == "observation"
        ws.socket.close()  # gone without a close frame, as a killed client goes
    deadline = time.monotonic() + 30
    while served.log.read_text().count("the client disconnected") == before:
        assert time.monotonic() < deadline, served.log.read_text()
        time.sleep(0.3)
    time.sleep(1)
    text = served.log.read_text()
    assert "Traceback" not in text and "Exception in ASGI application" not in text, text
    while _containers(served.pid) and time.monotonic() < deadline:
        time.sleep(0.3)
    assert _containers(served.pid) == []


@pytest.mark.docker
@pytest.mark.slow
def test_two_clients_finish_episodes_at_once(served: Served) -> None:
    from repogym.envs.openenv.models import RepogymAction
    from repogym.envs.openenv.remote import RepogymEnvClient

    tasks = {t.instance_id: t for t in load_suite("demo")}

    def episode(task_id: str) -> tuple[float, dict]:
        patch = tasks[task_id].patch
        with RepogymEnvClient(served.url, token=TOKEN, message_timeout_s=120).sync() as client:
            first = client.reset(task_id=task_id)
            assert first.observation.info["task_id"] == task_id and not first.done
            applied = client.step(RepogymAction(tool="bash", arguments={
                "command": f"cat > /tmp/p.diff <<'EOF'\n{patch}EOF\ngit apply /tmp/p.diff"}))
            assert applied.observation.info["exit_code"] == 0, applied.observation.text
            bad = client.step(RepogymAction(tool="nope"))
            assert bad.observation.info["action_error"] and not bad.done
            end = client.step(RepogymAction(text='{"tool": "submit"}'))
            assert end.done
            return float(end.reward or 0.0), end.observation.info

    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(episode, TASKS))
    for reward, info in results:
        assert reward == 1.0 and info["resolved"] and info["reward_components"]["resolved"]


@pytest.mark.docker
@pytest.mark.slow
def test_a_client_that_goes_quiet_leaves_no_container(served: Served) -> None:
    """A client resets, then sends nothing and never closes: the idle timeout (3 s here) ends
    its session and its container goes."""
    from websockets.asyncio.client import connect

    async def reset_and_hang() -> None:
        url = served.url.replace("http://", f"ws://repogym:{TOKEN}@") + "/ws"
        async with connect(url, open_timeout=30, ping_interval=None) as ws:
            await ws.send(json.dumps({"type": "reset", "data": {"task_id": TASKS[0]}}))
            reply = json.loads(await asyncio.wait_for(ws.recv(), 120))
            assert reply["type"] == "observation", reply
            assert _containers(served.pid), "the session should own a container"
            deadline = time.monotonic() + 40
            while _containers(served.pid) and time.monotonic() < deadline:
                await asyncio.sleep(0.5)  # the socket stays open; the client is just silent
            assert not _containers(served.pid), "the idle session kept its container"

    asyncio.run(reset_and_hang())


def test_serve_listens_on_loopback_unless_told() -> None:
    from repogym.scripts.cli import main

    assert main(["serve", "--host", "0.0.0.0", "--token", "t"]) == 2  # bad input
    with pytest.raises(ValueError, match="token"):
        from repogym.envs.openenv.server import ServeConfig

        ServeConfig(token="")
    from repogym.scripts.cli import build_parser

    args = build_parser(["serve"]).parse_args(["serve"])
    assert args.host == "127.0.0.1"


def test_a_session_draws_with_the_servers_sampler(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from repogym.envs.openenv.models import RepogymAction
    from repogym.envs.openenv.server import RepogymOpenEnv
    from repogym.scripts.cli import main

    weights, stats = tmp_path / "w.json", tmp_path / "stats.json"
    weights.write_text(json.dumps({"demo__stockroom-5": 1}))
    bound = type("Session", (RepogymOpenEnv,), {"env_kwargs": {
        "suite": "demo", "sandbox": "fake", "sampler": f"weights:{weights}",
        "stats": str(stats)}})
    session = bound()
    try:
        for seed in range(3):  # no task named: the sampler draws
            assert session.reset(seed=seed).info["task_id"] == "demo__stockroom-5"
        first = session.reset(start="failure")  # none kept yet: it says so
        assert first.info["start"] == "task" and "no failed episode" in first.info["start_note"]
        assert session.step(RepogymAction(text='{"tool": "submit"}')).done
    finally:
        session.close()
    assert json.loads(stats.read_text())["episodes"] == 1
    assert main(["serve", "--sampler", "bandit", "--token", "t"]) == 2
    assert "unknown name 'bandit'" in capsys.readouterr().err
