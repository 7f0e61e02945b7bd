"""``repogym serve``: the environment over OpenEnv's protocol (``openenv-core``'s own server).

Each WebSocket session at ``/ws`` owns one environment, hence one container at a time; a
session that sends nothing for ``idle_timeout`` seconds is closed and its container removed, and
so is one whose connection drops. Every route but ``/health`` needs the shared token, as
``Authorization: Bearer TOKEN`` or in the URL (``http://repogym:TOKEN@host:port``, which
OpenEnv's unmodified client turns into HTTP Basic). OpenEnv's stateless ``POST /reset`` and
``POST /step`` would start a container per request and throw it away, so they answer 400 and
say to use the WebSocket.
"""

from __future__ import annotations

import base64
import hmac
import json
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

from openenv.core.env_server.http_server import HTTPEnvServer
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import ConcurrencyConfig, ServerMode, State
from starlette.websockets import WebSocketDisconnect
from uvicorn.protocols.utils import ClientDisconnected

import repogym  # noqa: F401 - registers the environment
from repogym.envs.openenv.models import RepogymAction, RepogymObservation

LOOPBACK = "127.0.0.1"
LOG = logging.getLogger("uvicorn.error")  # the server's own log, as uvicorn prints it
UNAUTHORIZED = ("missing or wrong token: send the header 'Authorization: Bearer TOKEN', or "
                "connect to http://repogym:TOKEN@HOST:PORT")
# a close frame's reason holds at most 123 bytes
CLOSE_REASON = "missing or wrong token: send 'Authorization: Bearer TOKEN' or use " \
               "http://repogym:TOKEN@HOST:PORT"
WS_HINT = ("episodes live in a WebSocket session: connect to /ws (OpenEnv's EnvClient does) and "
           "send {\"type\": \"reset\", \"data\": {\"task_id\": ...}}, then {\"type\": \"step\", "
           "\"data\": {\"tool\": \"bash\", \"arguments\": {\"command\": \"ls\"}}}")


@dataclass(frozen=True)
class ServeConfig:
    """What ``repogym serve`` serves and how."""

    suite: str = "demo"  # a built-in suite name, a .jsonl file or a suite folder
    split: str | None = None  # None: the environment's default, the suite's train split
    token: str = ""  # the shared secret every client must present
    max_sessions: int = 8  # WebSocket sessions (episodes) at once
    idle_timeout: float = 300.0  # seconds without a message before a session is closed
    env_kwargs: dict[str, Any] = field(default_factory=dict)  # more gym.make arguments

    def __post_init__(self) -> None:
        if not self.token:
            raise ValueError("serve needs a token: pass --token TOKEN (or set REPOGYM_TOKEN)")
        if self.max_sessions < 1 or not self.idle_timeout > 0:
            raise ValueError(f"max_sessions={self.max_sessions}, idle_timeout="
                             f"{self.idle_timeout}: use at least 1 session and a positive timeout")


class RepogymOpenEnv(Environment[RepogymAction, RepogymObservation, State]):
    """One session's environment: ``repogym/SWE-v0`` behind OpenEnv's interface."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    env_kwargs: dict[str, Any] = {}  # bound per server by :func:`build_app`

    def __init__(self) -> None:
        import gymnasium as gym

        super().__init__()
        self.env = gym.make("repogym/SWE-v0", **self.env_kwargs)
        self._state = State(episode_id=None, step_count=0)

    def reset(self, seed: int | None = None, episode_id: str | None = None,
              task_id: str | None = None, start: str | None = None,
              **_: Any) -> RepogymObservation:
        """No ``task_id``: the env's sampler draws one; ``start="failure"``: from a kept
        failure of the task (see docs/curricula.md)."""
        options = {k: v for k, v in (("task_id", task_id), ("start", start)) if v}
        obs, info = self.env.reset(seed=seed, options=options or None)
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0,
                            task_id=info.get("task_id"))
        return RepogymObservation(text=str(obs), info=_json_safe(info), done=False, reward=0.0)

    def step(self, action: RepogymAction, timeout_s: float | None = None, **_: Any
             ) -> RepogymObservation:
        obs, reward, terminated, truncated, info = self.env.step(action.to_env())
        self._state.step_count += 1
        return RepogymObservation(text=str(obs), info=_json_safe(info), reward=float(reward),
                                  done=bool(terminated or truncated), truncated=bool(truncated))

    @property
    def state(self) -> State:
        return self._state

    def close(self) -> None:
        self.env.close()


def build_app(config: ServeConfig) -> Any:
    """The FastAPI application: OpenEnv's routes, the token guard, the 4xx hints."""
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse

    kwargs = {"suite": config.suite, "split": config.split, **config.env_kwargs}
    bound = type("RepogymSession", (RepogymOpenEnv,), {"env_kwargs": kwargs})
    app = FastAPI(title="repogym (OpenEnv)", docs_url=None, redoc_url=None)
    server = HTTPEnvServer(bound, RepogymAction, RepogymObservation, concurrency_config=(
        ConcurrencyConfig(max_concurrent_envs=config.max_sessions,
                          session_timeout=config.idle_timeout)))
    server.register_routes(app, mode=ServerMode.PRODUCTION)

    async def needs_session() -> JSONResponse:
        return JSONResponse({"error": WS_HINT}, status_code=400)

    app.add_api_route("/reset", needs_session, methods=["POST"])
    app.add_api_route("/step", needs_session, methods=["POST"])
    app.state.openenv = server
    return TokenGuard(app, config.token)


class TokenGuard:
    """ASGI middleware: requests without the token are refused with what to send instead;
    ``/health`` stays open. A client that disconnects is one line of the log.

    A plain HTTP request gets a 401 whose body says it. A WebSocket without the token is
    accepted only to be told, in OpenEnv's own error message and in the close frame's reason,
    and closed at once (1008, policy violation): a refused handshake reaches OpenEnv's client
    as "HTTP 401" alone, since the websockets library keeps the body to itself. Nothing of
    the environment runs for it."""

    def __init__(self, app: Any, token: str) -> None:
        self.app, self.token = app, token.encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket") or scope.get("path") == "/health" \
                or self._authorized(scope):
            if scope["type"] != "websocket":
                return await self.app(scope, receive, send)
            try:
                return await self.app(scope, receive, send)
            except (WebSocketDisconnect, ClientDisconnected, OSError) as exc:
                # a client that went away: OpenEnv has closed its session and container; its
                # last send then raises, which is no error of the server's
                client = ":".join(str(x) for x in scope.get("client") or ("?",))
                LOG.info("%s - WebSocket %s: the client disconnected (%s); its session is "
                         "closed", client, scope.get("path"), type(exc).__name__)
                return None
        if scope["type"] == "http":
            body = json.dumps({"error": UNAUTHORIZED}).encode()
            headers = [(b"content-type", b"application/json"),
                       (b"content-length", str(len(body)).encode()),
                       (b"www-authenticate", b'Bearer realm="repogym"')]
            await send({"type": "http.response.start", "status": 401, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        await receive()  # websocket.connect
        client = ":".join(str(x) for x in scope.get("client") or ("?",))
        LOG.info("%s - WebSocket %s: refused, missing or wrong token", client, scope.get("path"))
        # the client reads the error frame or the close frame first, as timing has it: the
        # same words in both
        error = {"type": "error", "data": {"message": CLOSE_REASON, "code": "UNAUTHORIZED"}}
        try:
            await send({"type": "websocket.accept"})
            await send({"type": "websocket.send", "text": json.dumps(error)})
            await send({"type": "websocket.close", "code": 1008, "reason": CLOSE_REASON})
        except (WebSocketDisconnect, ClientDisconnected, OSError):
            pass  # it left before hearing why

    def _authorized(self, scope: dict[str, Any]) -> bool:
        for name, value in scope.get("headers") or []:
            if name.lower() != b"authorization":
                continue
            kind, _, credentials = value.partition(b" ")
            if kind.lower() == b"bearer":
                given = credentials.strip()
            elif kind.lower() == b"basic":
                try:
                    given = base64.b64decode(credentials.strip()).partition(b":")[2]
                except ValueError:
                    return False
            else:
                return False
            return hmac.compare_digest(given, self.token)
        return False


def _json_safe(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))
