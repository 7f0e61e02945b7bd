"""repogym's action and observation as OpenEnv messages (pydantic models)."""

from __future__ import annotations

from typing import Any

from openenv.core.env_server.types import Action, Observation
from pydantic import Field


class RepogymAction(Action):
    """One tool call: ``{"tool": "bash", "arguments": {"command": "ls"}}``, or ``text`` holding
    anything ``env.step`` accepts (a JSON tool call, raw model output with a ``<tool_call>``)."""

    tool: str | None = Field(default=None, description="bash, view, create, str_replace, "
                             "insert, undo_edit or submit")
    arguments: dict[str, Any] = Field(default_factory=dict, description="the tool's arguments")
    text: str | None = Field(default=None, description="a raw action instead of tool/arguments")

    def to_env(self) -> dict[str, Any] | str:
        if self.text is not None:
            return self.text
        return {"name": self.tool or "", "arguments": self.arguments}


class RepogymObservation(Observation):
    """The environment's observation text and its ``info`` (after submit: grading, reward
    components, flags, patch)."""

    text: str = Field(default="", description="the observation: task prompt or tool output")
    info: dict[str, Any] = Field(default_factory=dict, description="the step's info dict")
    truncated: bool = Field(default=False, description="the episode hit a budget")
