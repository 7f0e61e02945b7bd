"""The pool broker: only peers that hold its key are served, and a stalled one blocks no other."""

from __future__ import annotations

import os
import socket
import time
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client
from typing import Any

import pytest

from repogym.sandbox.broker import ENV_VAR, Broker
from repogym.sandbox.shared import PoolKey


class StubPool:
    """The parts of a pool that a session's `stats` request reads."""

    stats = {"hits": 3}

    def counts(self) -> dict[str, int]:
        return {"ready": 1}


def test_only_peers_that_hold_the_key_are_served() -> None:
    closed: list[Any] = []
    before = os.environ.get(ENV_VAR)
    broker = Broker(lambda key: StubPool(), closed.append, lambda pool, config: None)
    stalled = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        assert os.environ[ENV_VAR].startswith(f"{os.getpid()}:")
        stalled.connect("\0" + broker.name)  # connects and never answers the challenge
        with pytest.raises(AuthenticationError):
            Client("\0" + broker.name, family="AF_UNIX", authkey=b"not the key")
        client = Client("\0" + broker.name, family="AF_UNIX", authkey=broker.key)
        client.send(("open", PoolKey("run", 16_000)))
        assert client.recv()[0] == "ok"
        client.send(("stats",))
        assert client.recv() == ("ok", {"hits": 3, "ready": 1})
        client.send(("warp",))
        status, error = client.recv()
        assert status == "error" and "unknown broker request" in str(error)
        client.close()  # the session ends: its pool is closed
        deadline = time.monotonic() + 5
        while not closed and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(closed) == 1
    finally:
        stalled.close()
        broker.close()
        if before is not None:
            os.environ[ENV_VAR] = before
