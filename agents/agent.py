"""The agent seam: an object that turns observations into tool calls.

An agent sees exactly what a Gymnasium user sees: the observation string and the ``info`` dict
(``info["task_id"]``, ``info["tools"]`` with the OpenAI function schemas, ...). ``act`` returns
one action in any form ``env.step`` accepts: a dict such as ``{"tool": "bash", "command": "ls"}``,
a JSON string, or raw model text holding one ``<tool_call>...</tool_call>`` block.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from repogym.schema import Task

Action = dict[str, Any] | str
SUBMIT: dict[str, Any] = {"tool": "submit"}


@runtime_checkable
class Agent(Protocol):
    """One agent plays one episode at a time; ``reset`` starts the next one."""

    def reset(self, obs: str, info: dict[str, Any]) -> None:
        """Called with what ``env.reset`` returned."""

    def act(self, obs: str, info: dict[str, Any]) -> Action:
        """The next action, given the latest observation and info (after reset: reset's)."""


def close_agent(agent: Agent) -> None:
    """Lets go of what an agent holds (a harness's thread), where it has a ``close()``: the
    protocol does not require one."""
    close = getattr(agent, "close", None)
    if callable(close):
        close()


class AgentError(Exception):
    """The agent itself failed (its model endpoint refused, its task is unknown, ...).

    Reported as an agent failure (``error_kind="agent"``), never as an infrastructure one.
    """


def task_table(tasks: Sequence[Task] | Mapping[str, Task] | None) -> dict[str, Task]:
    """Tasks by instance id, from a list or a mapping (agents that need the task use it)."""
    if tasks is None:
        return {}
    if isinstance(tasks, Mapping):
        return dict(tasks)
    return {t.instance_id: t for t in tasks}


class ScriptedAgent:
    """Plays a fixed list of actions chosen at reset, then submits.

    The reference agents (gold, null) are scripts; subclasses override :meth:`script`.
    """

    def __init__(self) -> None:
        self._queue: list[Action] = []

    def script(self, obs: str, info: dict[str, Any]) -> list[Action]:
        return []

    def reset(self, obs: str, info: dict[str, Any]) -> None:
        self._queue = list(self.script(obs, info))

    def act(self, obs: str, info: dict[str, Any]) -> Action:
        return self._queue.pop(0) if self._queue else dict(SUBMIT)
