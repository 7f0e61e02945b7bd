"""Chat-template framing in token ids: the first prompt, then each observation as a suffix.

The conversation is never re-rendered and re-tokenised as a whole: the policy's sampled ids stay
exactly as sampled, and each observation is appended as the ids of the template text that comes
between the end of the assistant's content and the start of the next assistant turn.
"""

from __future__ import annotations

from typing import Any

_SENTINEL = "REPOGYMASSISTANTTURN7f3a"


class ChatFormat:
    """Turns environment strings into the token ids the policy reads."""

    def __init__(self, tokenizer: Any, system_prompt: str = "") -> None:
        self.tokenizer = tokenizer
        self.system_prompt = system_prompt
        self.observation_role = self._pick_observation_role()

    def prompt_ids(self, observation: str, tools: list[dict[str, Any]] | None = None) -> list[int]:
        """The task prompt with the tool schemas, ending with the assistant generation prompt."""
        messages = [{"role": "user", "content": observation}]
        if self.system_prompt:
            messages.insert(0, {"role": "system", "content": self.system_prompt})
        text = self.tokenizer.apply_chat_template(messages, tools=tools or None,
                                                  add_generation_prompt=True, tokenize=False)
        return self._encode(text)

    def continuation_ids(self, prompt: str, tools: list[dict[str, Any]] | None,
                         turns: list[dict[str, str]]) -> list[int]:
        """The task prompt, then earlier turns (``action``, ``observation``) as the
        assistant's and the environment's, ending where the policy goes on (a failure
        start's prefix)."""
        ids = self.prompt_ids(prompt, tools)
        for turn in turns:
            action = self._encode(turn["action"])
            ids += action
            ids += self.observation_ids(turn["observation"], action[-1] if action else None)
        return ids

    def observation_ids(self, observation: str, last_token: int | None) -> list[int]:
        """Closes the assistant turn, adds the observation, opens the next assistant turn.

        `last_token` is the last id the policy sampled: when it already is the template's
        end-of-turn token it is not repeated.
        """
        suffix = self._suffix(observation, self.observation_role)
        if last_token is not None:
            end = self.tokenizer.convert_ids_to_tokens(int(last_token))
            if isinstance(end, str) and end and suffix.startswith(end):
                suffix = suffix[len(end):]
        return self._encode(suffix)

    def _suffix(self, observation: str, role: str) -> str:
        messages = [
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": _SENTINEL},
            {"role": role, "content": observation},
        ]
        text = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True,
                                                  tokenize=False)
        at = text.find(_SENTINEL)
        if at < 0:
            raise ValueError("the chat template drops assistant content; give the tokenizer a "
                             "template that renders it (or a checkpoint with a standard one)")
        return str(text[at + len(_SENTINEL):])

    def _pick_observation_role(self) -> str:
        # Tool results belong in a `tool` turn; templates that reject that role (strict
        # user/assistant alternation) get the observation as a user turn instead.
        try:
            self._suffix("x", "tool")
            return "tool"
        except Exception:  # any template error means the role is unsupported
            self._suffix("x", "user")
            return "user"

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
