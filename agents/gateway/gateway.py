"""Running the gateway: in a background thread from Python, or in the foreground from the CLI.

    with Gateway("http://127.0.0.1:8000/v1", record_dir="runs/calls") as gateway:
        base_url = gateway.session_url("episode-1")   # give this to the harness as its base URL
        ...
        gateway.calls("episode-1")                     # every call of that episode, in order
"""

from __future__ import annotations

import signal
import socket
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

import uvicorn

from repogym.agents.gateway.app import GatewayConfig, build_app
from repogym.agents.gateway.calls import CallStore, check_session

LOOPBACK = "127.0.0.1"


def bind(host: str, port: int) -> socket.socket:
    """A listening socket; port 0 takes a free one (read it back from the socket)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise OSError(f"cannot listen on {host}:{port} ({exc}): pick another --port") from exc
    return sock


class Gateway:
    """The recording gateway in a background thread; a context manager."""

    def __init__(self, upstream: str, record_dir: str | Path, host: str = LOOPBACK,
                 port: int = 0, timeout: float = 600.0, api_key: str | None = None,
                 token_ids: bool = False) -> None:
        self.config = GatewayConfig(upstream=upstream, record_dir=str(record_dir),
                                    timeout=timeout, api_key=api_key, token_ids=token_ids)
        self.host, self.port = host, port
        self.store = CallStore(record_dir)
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def session_url(self, session: str, record_dir: str | Path | None = None) -> str:
        """The OpenAI base URL (ending in ``/v1``) whose calls go to ``session``'s record, under
        ``record_dir`` when given (else the gateway's own)."""
        if record_dir is not None:
            self.store.assign(session, record_dir)
        return f"{self.url}/s/{check_session(session)}/v1"

    def calls(self, session: str) -> list[dict[str, Any]]:
        return self.store.read(session)

    def calls_path(self, session: str) -> Path:
        return self.store.path(session)

    def start(self, wait: float = 15.0) -> Gateway:
        sock = bind(self.host, self.port)
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(build_app(self.config, self.store), log_level="warning",
                                lifespan="on", timeout_graceful_shutdown=5)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]},
                                        name="repogym-gateway", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + wait
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the gateway did not start on {self.url}")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = self._thread = None

    def __enter__(self) -> Gateway:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()


class _Server(uvicorn.Server):
    """uvicorn's server, remembering whether SIGINT stopped it."""

    interrupted = False

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.interrupted = self.interrupted or sig == signal.SIGINT
        super().handle_exit(sig, frame)


def run_server(config: uvicorn.Config, sock: socket.socket) -> None:
    """A command's foreground server (``repogym gateway``, ``repogym serve``): Ctrl-C (SIGINT)
    stops it with KeyboardInterrupt (the command's status 130). uvicorn raises the signal
    again once it has stopped, which does nothing where the process inherited SIGINT ignored
    (a job a shell started in the background): the command then ended with status 0, as if
    nothing had stopped it."""
    server = _Server(config)
    server.run(sockets=[sock])
    if server.interrupted:
        raise KeyboardInterrupt


def serve_forever(config: GatewayConfig, host: str, port: int) -> None:
    """The gateway command's server (Ctrl-C stops it: :func:`run_server`)."""
    sock = bind(host, port)
    run_server(uvicorn.Config(build_app(config), log_level="info", lifespan="on"), sock)
