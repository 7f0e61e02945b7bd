"""``llm``: any OpenAI-compatible chat endpoint, with native tool calling.

The environment's tool schemas (``info["tools"]``) go to the model as ``tools=``; the model's
first tool call is the action, and the observation comes back as the ``tool`` message. A reply
without a tool call is passed to the environment as text, so models that write
``<tool_call>{...}</tool_call>`` in their content (Qwen, Hermes) work as well.

Configuration (options win over the environment):

=====================  =====================  ===========================================
option                 environment            meaning
=====================  =====================  ===========================================
``base_url``           ``OPENAI_BASE_URL``    e.g. ``https://api.openai.com/v1``,
                                              ``http://localhost:8000/v1`` (vLLM, SGLang,
                                              llama.cpp server, Ollama's ``/v1``)
``model``              ``REPOGYM_LLM_MODEL``  the model name the endpoint serves
``api_key``            ``OPENAI_API_KEY``     sent as ``Authorization: Bearer``; may be empty
=====================  =====================  ===========================================

Limits: ``max_steps`` model calls per episode, ``max_tokens`` per reply, ``max_total_tokens``
per episode (from the endpoint's ``usage``, or about four characters a token without it);
when one runs out the agent submits. Requests use only the standard library (urllib).

Example::

    export OPENAI_BASE_URL=http://localhost:8000/v1 REPOGYM_LLM_MODEL=Qwen/Qwen2.5-Coder-7B-Instruct
    repogym eval --suite demo --agent llm --workers 4 --out runs/qwen
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from repogym import settings
from repogym.agents.agent import SUBMIT, Action, AgentError

SYSTEM_PROMPT = (
    "You are a careful software engineer working in a repository through tools. Read the "
    "issue, find the code involved, change it so the issue is resolved, check your change by "
    "running code or tests, and call `submit` when you are done. Call exactly one tool per "
    "reply."
)
RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


@dataclass(frozen=True)
class LLMConfig:
    """How to reach the model and how much of it one episode may use."""

    base_url: str = field(default_factory=lambda: os.environ.get(
        "OPENAI_BASE_URL", "https://api.openai.com/v1"))
    model: str = field(default_factory=settings.LLM_MODEL.get)
    api_key: str = field(default_factory=lambda: os.environ.get("OPENAI_API_KEY", ""))
    max_steps: int = 30  # model calls per episode; then the agent submits
    max_tokens: int = 4096  # per reply
    max_total_tokens: int = 300_000  # prompt + completion, summed over the episode
    temperature: float = 0.0
    timeout: float = 300.0  # seconds per request
    retries: int = 3  # for 429, 5xx and connection errors
    backoff: float = 2.0  # seconds before the first retry; doubled each time
    max_observation_chars: int = 30_000  # longer observations keep head and tail
    system_prompt: str = SYSTEM_PROMPT

    def __post_init__(self) -> None:
        if not self.model:
            raise ValueError("the llm agent needs a model: set REPOGYM_LLM_MODEL or pass "
                             "model=... (--agent-option model=NAME)")
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url={self.base_url!r}: give an http(s) URL such as "
                             "http://localhost:8000/v1")
        if min(self.max_steps, self.max_tokens, self.max_total_tokens) < 1:
            raise ValueError("max_steps, max_tokens and max_total_tokens must be at least 1")
        if self.retries < 0 or self.timeout <= 0 or self.backoff < 0:
            raise ValueError(f"retries={self.retries}, timeout={self.timeout}, backoff="
                             f"{self.backoff}: use retries >= 0, timeout > 0, backoff >= 0")


class ChatClient:
    """POSTs to ``{base_url}/chat/completions``; retries what a retry can fix."""

    def __init__(self, config: LLMConfig) -> None:
        self.config = config
        self.url = config.base_url.rstrip("/") + "/chat/completions"

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
                 ) -> dict[str, Any]:
        c = self.config
        body: dict[str, Any] = {"model": c.model, "messages": messages,
                                "max_tokens": c.max_tokens, "temperature": c.temperature}
        if tools:
            body.update(tools=tools, tool_choice="auto")
        delay = c.backoff
        for attempt in range(c.retries + 1):
            try:
                return self._post(body)
            except _Retryable as exc:
                if attempt == c.retries:
                    raise AgentError(f"{self.url}: {exc} (after {attempt + 1} tries)") from exc
                time.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        if self.config.api_key:
            headers["Authorization"] = f"Bearer {self.config.api_key}"
        request = urllib.request.Request(self.url, data=json.dumps(body).encode(),
                                         headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.config.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:500].decode(errors="replace")
            if exc.code in RETRY_STATUS:
                raise _Retryable(f"HTTP {exc.code}: {detail}") from exc
            raise AgentError(f"{self.url} answered HTTP {exc.code}: {detail} (check base_url, "
                             "model and OPENAI_API_KEY)") from exc
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            raise _Retryable(str(exc)) from exc
        try:
            data = json.loads(raw)
            data["choices"][0]["message"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise AgentError(f"{self.url} sent no chat completion: {raw[:300]!r}") from exc
        return data  # type: ignore[no-any-return]


class _Retryable(Exception):
    pass


class LLMAgent:
    """One conversation per episode; options are :class:`LLMConfig`'s fields."""

    def __init__(self, **options: Any) -> None:
        self.config = LLMConfig(**options)
        self.client = ChatClient(self.config)
        self.model_name = self.config.model
        self.messages: list[dict[str, Any]] = []
        self.tools: list[dict[str, Any]] = []
        self.calls = self.tokens = 0
        self.stop_reason: str | None = None
        self._pending: str | None = None  # the tool call id the next observation answers
        self._fresh = True

    def reset(self, obs: str, info: dict[str, Any]) -> None:
        self.messages = [{"role": "system", "content": self.config.system_prompt},
                         {"role": "user", "content": self._clip(obs)}]
        self.tools = list(info.get("tools") or [])
        self.calls = self.tokens = 0
        self.stop_reason, self._pending, self._fresh = None, None, True

    def act(self, obs: str, info: dict[str, Any]) -> Action:
        if not self._fresh:
            self._observe(obs)
        self._fresh = False
        if self.calls >= self.config.max_steps:
            self.stop_reason = f"max_steps={self.config.max_steps}"
            return dict(SUBMIT)
        if self.tokens >= self.config.max_total_tokens:
            self.stop_reason = f"max_total_tokens={self.config.max_total_tokens}"
            return dict(SUBMIT)
        reply = self.client.complete(self.messages, self.tools)
        self.calls += 1
        self.tokens += self._usage(reply)
        return self._take(reply["choices"][0]["message"])

    def _observe(self, obs: str) -> None:
        if self._pending is not None:
            self.messages.append({"role": "tool", "tool_call_id": self._pending,
                                  "content": self._clip(obs)})
        else:
            self.messages.append({"role": "user", "content": self._clip(obs)})

    def _take(self, message: dict[str, Any]) -> Action:
        content = message.get("content") or ""
        calls = message.get("tool_calls") or []
        if not calls:
            self._pending = None
            self.messages.append({"role": "assistant", "content": content})
            return content
        # the environment runs one call per step; keeping only the first in the history means
        # every tool call the model sees has exactly one answer, as the API requires
        first = calls[0]
        self._pending = first.get("id") or f"call_{self.calls}"
        function = first.get("function") or {}
        self.messages.append({"role": "assistant", "content": content or None, "tool_calls": [
            {"id": self._pending, "type": "function", "function": function}]})
        return {"name": function.get("name", ""), "arguments": function.get("arguments") or {}}

    def _usage(self, reply: dict[str, Any]) -> int:
        usage = reply.get("usage") or {}
        if usage.get("total_tokens"):
            return int(usage["total_tokens"])
        text = json.dumps(self.messages) + json.dumps(reply["choices"][0]["message"])
        return len(text) // 4

    def _clip(self, text: str) -> str:
        limit = self.config.max_observation_chars
        if len(text) <= limit:
            return text
        half = limit // 2
        return f"{text[:half]}\n[... {len(text) - limit} characters cut ...]\n{text[-half:]}"
