"""The gateway's ASGI application: an OpenAI-compatible proxy that records every call.

Routes (``SESSION`` is any id of letters, digits, ``.``, ``_``, ``-``; it names the record):

- ``POST /s/SESSION/v1/chat/completions``: forwarded to ``UPSTREAM/chat/completions``, plain
  or streamed, and recorded (see :mod:`repogym.agents.gateway.calls`);
- ``GET|POST /s/SESSION/v1/...``: anything else (``/models``, ...) is forwarded unrecorded;
- ``GET /health``.

An upstream error reaches the harness as the upstream sent it (status, body); an upstream
that times out or cannot be reached gets a 504 or 502 with an OpenAI-style error body. Both are
recorded.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from repogym.agents.gateway.calls import SESSION_RE, CallStore
from repogym.agents.gateway.completions import assemble, parse_sse, token_fields

# hop-by-hop and framing headers are the proxy's own business on each side
_DROP_REQUEST = {"host", "content-length", "connection", "transfer-encoding", "accept-encoding",
                 "keep-alive", "upgrade", "te", "trailer", "proxy-authorization"}
_KEEP_RESPONSE = {"content-type", "x-request-id", "openai-processing-ms", "retry-after"}


@dataclass(frozen=True)
class GatewayConfig:
    """Where calls go and how they are recorded."""

    upstream: str  # base URL of an OpenAI-compatible API, e.g. http://127.0.0.1:8000/v1
    record_dir: str  # one <session>.calls.jsonl per session
    timeout: float = 600.0  # seconds the upstream may take to connect, or between two reads
    api_key: str | None = None  # sent upstream instead of the harness's own Authorization
    token_ids: bool = False  # ask the backend for token ids and logprobs (vLLM's fields)

    def __post_init__(self) -> None:
        if not self.upstream.startswith(("http://", "https://")):
            raise ValueError(f"upstream={self.upstream!r}: give the backend's base URL, such as "
                             "http://127.0.0.1:8000/v1")
        if not self.timeout > 0:
            raise ValueError(f"timeout={self.timeout}: use a positive number of seconds")


def build_app(config: GatewayConfig, store: CallStore | None = None) -> Starlette:
    store = store or CallStore(config.record_dir)
    proxy = _Proxy(config, store)

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        timeout = httpx.Timeout(config.timeout, connect=min(config.timeout, 30.0))
        async with httpx.AsyncClient(timeout=timeout) as client:
            proxy.client = client
            yield

    routes = [
        Route("/s/{session}/v1/chat/completions", proxy.chat, methods=["POST"]),
        Route("/s/{session}/v1/{path:path}", proxy.passthrough, methods=["GET", "POST"]),
        Route("/health", lambda _r: JSONResponse({"status": "ok"}), methods=["GET"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.store = store
    return app


def error_body(message: str, kind: str, status: int) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "code": status}}


class _Proxy:
    def __init__(self, config: GatewayConfig, store: CallStore) -> None:
        self.config, self.store = config, store
        self.upstream = config.upstream.rstrip("/")
        self.client: httpx.AsyncClient | None = None

    async def chat(self, request: Request) -> Response:
        session = request.path_params["session"]
        if not SESSION_RE.fullmatch(session):
            return _bad(f"session id {session!r}: use letters, digits, '.', '_' or '-'")
        try:
            body = json.loads(await request.body())
        except (ValueError, UnicodeDecodeError):
            body = None
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _bad("send a JSON chat completion request: {\"model\": ..., \"messages\": "
                        "[...]} (tools and stream optional)")
        if self.config.token_ids:
            body.setdefault("return_token_ids", True)
            body.setdefault("logprobs", True)
        call = _Call(self.store, session, body)
        upstream = self._request("POST", "chat/completions", request, json=body)
        if body.get("stream"):
            return await self._stream(upstream, call)
        assert self.client is not None
        try:
            response = await self.client.send(upstream)
        except httpx.HTTPError as exc:
            return call.failed(exc)
        return call.answered(response)

    async def _stream(self, upstream: httpx.Request, call: _Call) -> Response:
        assert self.client is not None
        try:
            response = await self.client.send(upstream, stream=True)
        except httpx.HTTPError as exc:
            return call.failed(exc)
        if response.status_code >= 400:
            await response.aread()
            return call.answered(response)

        async def relay() -> AsyncIterator[bytes]:
            seen, held, error = bytearray(), b"", None
            try:
                # each chunk goes on at once except the last, held until the call is recorded:
                # the harness never has an answer that the record lacks
                async for chunk in response.aiter_bytes():
                    seen += chunk
                    if held:
                        yield held
                    held = chunk
            except httpx.HTTPError as exc:
                error = f"the upstream stream broke off: {type(exc).__name__}: {exc}"
            finally:
                await response.aclose()
                call.streamed(response.status_code, bytes(seen), error)
            if held:
                yield held

        return StreamingResponse(relay(), status_code=response.status_code,
                                 headers=_response_headers(response))

    async def passthrough(self, request: Request) -> Response:
        if not SESSION_RE.fullmatch(request.path_params["session"]):
            return _bad("session id: use letters, digits, '.', '_' or '-'")
        assert self.client is not None
        upstream = self._request(request.method, request.path_params["path"], request,
                                 content=await request.body())
        try:
            response = await self.client.send(upstream)
        except httpx.HTTPError as exc:
            status, kind = _failure_kind(exc)
            return JSONResponse(error_body(_describe(exc), kind, status), status_code=status)
        return Response(response.content, status_code=response.status_code,
                        headers=_response_headers(response))

    def _request(self, method: str, path: str, request: Request, **kwargs: Any) -> httpx.Request:
        assert self.client is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _DROP_REQUEST}
        if self.config.api_key is not None:
            headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}
            headers["authorization"] = f"Bearer {self.config.api_key}"
        return self.client.build_request(method, f"{self.upstream}/{path}", headers=headers,
                                         params=request.query_params, **kwargs)


class _Call:
    """One recorded call: the request now, the outcome when it is known."""

    def __init__(self, store: CallStore, session: str, body: dict[str, Any]) -> None:
        self.store, self.session, self.body = store, session, body
        self.started_at, self._t0 = time.time(), time.monotonic()

    def answered(self, response: httpx.Response) -> Response:
        try:
            data = response.json()
        except ValueError:
            data = None
        ok = response.status_code < 400 and isinstance(data, dict)
        error = None if ok else {"status": response.status_code,
                                 "body": data if data is not None else response.text[:10_000]}
        self._write(response.status_code, data if ok else None, error, stream=False)
        return Response(response.content, status_code=response.status_code,
                        headers=_response_headers(response))

    def streamed(self, status: int, raw: bytes, error: str | None) -> None:
        reply = assemble(parse_sse(raw))
        self._write(status, reply, {"message": error} if error else None, stream=True)

    def failed(self, exc: httpx.HTTPError) -> Response:
        status, kind = _failure_kind(exc)
        message = _describe(exc)
        self._write(status, None, {"status": status, "type": kind, "message": message},
                    stream=bool(self.body.get("stream")))
        return JSONResponse(error_body(message, kind, status), status_code=status)

    def _write(self, status: int, reply: dict[str, Any] | None, error: dict[str, Any] | None,
               stream: bool) -> None:
        tokens = token_fields(reply) if reply else {
            "prompt_token_ids": None, "completion_token_ids": None, "logprobs": None}
        self.store.append(self.session, {
            "started_at": self.started_at, "latency_s": round(time.monotonic() - self._t0, 6),
            "status": status, "stream": stream, "request": self.body, "response": reply,
            "usage": (reply or {}).get("usage"), "error": error, **tokens})


def _failure_kind(exc: httpx.HTTPError) -> tuple[int, str]:
    if isinstance(exc, httpx.TimeoutException):
        return 504, "upstream_timeout"
    return 502, "upstream_unreachable"


def _describe(exc: httpx.HTTPError) -> str:
    where = str(exc.request.url) if _has_request(exc) else "the upstream"
    if isinstance(exc, httpx.TimeoutException):
        return f"{where} did not answer in time ({type(exc).__name__}); the gateway gave up"
    return f"{where} could not be reached: {type(exc).__name__}: {exc}"


def _has_request(exc: httpx.HTTPError) -> bool:
    try:
        exc.request  # noqa: B018 - raises RuntimeError when the error has no request
    except RuntimeError:
        return False
    return True


def _response_headers(response: httpx.Response) -> dict[str, str]:
    return {k: v for k, v in response.headers.items() if k.lower() in _KEEP_RESPONSE}


def _bad(message: str) -> JSONResponse:
    return JSONResponse(error_body(message, "invalid_request_error", 400), status_code=400)
