"""Problem statements written by a language model behind an OpenAI-compatible endpoint.

Optional: a source writes its own statement from templates, and asks the model only when an
endpoint and a model are configured (flags, or ``OPENAI_BASE_URL`` and ``REPOGYM_LLM_MODEL``;
the key comes from ``OPENAI_API_KEY``).
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
from dataclasses import dataclass

from repogym import settings
from repogym.errors import RepogymError

from .common import Log


class LLMError(RepogymError):
    """The endpoint could not be reached or answered something unusable."""


@dataclass(frozen=True)
class LLMConfig:
    base_url: str  # e.g. http://localhost:8000/v1 (``/chat/completions`` is appended)
    model: str
    api_key: str = ""
    timeout: float = 120.0
    max_tokens: int = 1024

    def __post_init__(self) -> None:
        if not re.match(r"https?://", self.base_url):
            raise ValueError(f"--llm-base-url {self.base_url!r}: give an http(s):// URL.")
        if not self.model:
            raise ValueError("--llm-model is empty: name the model the endpoint serves.")
        if self.timeout <= 0 or self.max_tokens < 1:
            raise ValueError("LLM timeout and max_tokens must be positive.")

    @classmethod
    def from_env(cls, base_url: str | None = None, model: str | None = None) -> LLMConfig | None:
        """The configured endpoint, or None. Flags win over the environment; a flag without
        its partner is an error, but a stray ``OPENAI_BASE_URL`` alone is not."""
        url = base_url or os.environ.get("OPENAI_BASE_URL", "")
        name = model or settings.LLM_MODEL.get()
        if (base_url or model) and not (url and name):
            raise ValueError(
                "an LLM endpoint needs both --llm-base-url (or OPENAI_BASE_URL) and "
                "--llm-model (or REPOGYM_LLM_MODEL)."
            )
        if not (url and name):
            return None
        return cls(base_url=url, model=name, api_key=os.environ.get("OPENAI_API_KEY", ""))

    def describe(self) -> dict[str, str]:
        """The config for reports (never the key)."""
        return {"base_url": self.base_url, "model": self.model}


def complete(config: LLMConfig, system: str, user: str) -> str:
    """One chat completion at temperature 0; returns the answer without reasoning tags."""
    body = json.dumps({
        "model": config.model, "temperature": 0, "max_tokens": config.max_tokens,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
    }).encode()
    headers = {"Content-Type": "application/json"}
    if config.api_key:
        headers["Authorization"] = f"Bearer {config.api_key}"
    url = config.base_url.rstrip("/") + "/chat/completions"
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=config.timeout) as response:
            data = json.loads(response.read().decode())
        text = data["choices"][0]["message"]["content"] or ""
    except (urllib.error.URLError, OSError, ValueError, KeyError, IndexError, TypeError) as err:
        raise LLMError(f"LLM endpoint {url} failed ({err}); check --llm-base-url, "
                       "--llm-model and OPENAI_API_KEY, or drop them to use templates.") from err
    text = re.sub(r"<think>.*?</think>", "", text, flags=re.DOTALL).strip()
    if not text:
        raise LLMError(f"LLM endpoint {url} answered an empty message; try another model.")
    return text


ISSUE_SYSTEM = (
    "You write GitHub issues for a software repository. Write as a user who hit the problem: "
    "what they did, what happened, what they expected. Never describe the fix, never name the "
    "lines to change, never include code of the fix. Plain Markdown, no preamble."
)
SPEC_SYSTEM = (
    "You write a specification for code that a developer must implement. Describe the "
    "behaviour precisely (inputs, outputs, errors, edge cases) from the material given. Never "
    "write an implementation. Plain Markdown, no preamble."
)


def statement(config: LLMConfig | None, system: str, prompt: str, fallback: str,
              log: Log) -> str:
    """The model's text for ``prompt``, or ``fallback`` when no model is configured or the call
    fails (the failure is logged; one bad answer should not cost a validated task)."""
    if config is None:
        return fallback
    try:
        return complete(config, system, prompt)
    except LLMError as err:
        log(f"warning: {err} Using the template statement instead.")
        return fallback
