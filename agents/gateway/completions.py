"""Reading chat completions: token ids and logprobs, and streamed chunks put back together.

vLLM returns the exact tokens when asked (``"return_token_ids": true`` and ``"logprobs": true``
in the request): ``prompt_token_ids`` at the top of the response (of the first chunk when
streaming), ``choices[i].token_ids`` for the generated ids (per chunk when streaming), and
``choices[i].logprobs.content[j].logprob`` per generated token. Other backends simply leave
these out, and the record holds ``None``.
"""

from __future__ import annotations

import json
from typing import Any


def token_fields(response: dict[str, Any]) -> dict[str, Any]:
    """``prompt_token_ids``, ``completion_token_ids`` and ``logprobs`` of choice 0 (or None)."""
    choice = (response.get("choices") or [{}])[0] or {}
    content = (choice.get("logprobs") or {}).get("content")
    return {
        "prompt_token_ids": response.get("prompt_token_ids"),
        "completion_token_ids": choice.get("token_ids"),
        "logprobs": [entry.get("logprob") for entry in content] if content else None,
    }


def parse_sse(data: bytes) -> list[dict[str, Any]]:
    """The JSON chunks of a server-sent event stream (``data: {...}`` lines; ``[DONE]`` ends)."""
    chunks = []
    for line in data.decode("utf-8", errors="replace").splitlines():
        if not line.startswith("data:"):
            continue
        payload = line[len("data:"):].strip()
        if not payload or payload == "[DONE]":
            continue
        try:
            chunk = json.loads(payload)
        except json.JSONDecodeError:
            continue  # a backend's keep-alive or comment: not part of the answer
        if isinstance(chunk, dict):
            chunks.append(chunk)
    return chunks


def assemble(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """A streamed reply as one ``chat.completion`` (choice 0), with its token ids joined."""
    message: dict[str, Any] = {"role": "assistant", "content": None}
    calls: dict[int, dict[str, Any]] = {}
    out: dict[str, Any] = {"object": "chat.completion", "choices": []}
    token_ids: list[int] = []
    logprobs: list[dict[str, Any]] = []
    finish = None
    for chunk in chunks:
        for key in ("id", "model", "created", "system_fingerprint"):
            if chunk.get(key) is not None:
                out.setdefault(key, chunk[key])
        if chunk.get("usage"):
            out["usage"] = chunk["usage"]
        if chunk.get("prompt_token_ids") is not None and "prompt_token_ids" not in out:
            out["prompt_token_ids"] = chunk["prompt_token_ids"]
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            _merge_delta(message, calls, choice.get("delta") or {})
            token_ids += choice.get("token_ids") or []
            logprobs += (choice.get("logprobs") or {}).get("content") or []
            finish = choice.get("finish_reason") or finish
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    choice_out: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish}
    if token_ids:
        choice_out["token_ids"] = token_ids
    if logprobs:
        choice_out["logprobs"] = {"content": logprobs}
    out["choices"] = [choice_out]
    return out


def _merge_delta(message: dict[str, Any], calls: dict[int, dict[str, Any]],
                 delta: dict[str, Any]) -> None:
    if delta.get("role"):
        message["role"] = delta["role"]
    for key in ("content", "reasoning_content"):
        if delta.get(key):
            message[key] = (message.get(key) or "") + delta[key]
    for part in delta.get("tool_calls") or []:
        call = calls.setdefault(int(part.get("index", len(calls))),
                                {"id": None, "type": "function",
                                 "function": {"name": "", "arguments": ""}})
        if part.get("id"):
            call["id"] = part["id"]
        function = part.get("function") or {}
        call["function"]["name"] += function.get("name") or ""
        call["function"]["arguments"] += function.get("arguments") or ""
