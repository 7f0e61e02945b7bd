"""Agents by name: a table of ``"module:Class"`` strings, imported only when chosen.

An agent class takes keyword options; one that declares a ``tasks`` parameter also gets the
suite's tasks (a dict by instance id), which is how the gold agent finds its patch. Add an agent
by adding a line here, or call :func:`make_agent` with a ``"module:Class"`` string directly.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping, Sequence
from typing import Any

from repogym.agents.agent import Agent, task_table
from repogym.schema import Task

AGENTS: dict[str, str] = {
    "gold": "repogym.agents.gold:GoldAgent",
    "null": "repogym.agents.null:NullAgent",
    "random": "repogym.agents.random_agent:RandomAgent",
    "llm": "repogym.agents.llm:LLMAgent",
    "hacker": "repogym.agents.hacker:HackerAgent",
    "harness:mini-swe-agent": "repogym.agents.harness.minisweagent:MiniSweAgentHarness",
}


def agent_names() -> list[str]:
    return sorted(AGENTS)


def agent_class(name: str) -> type:
    """The class behind ``name`` (a table name or ``"module:Class"``)."""
    target = AGENTS.get(name)
    if target is None and ":" in name:
        target = name
    if target is None:
        raise ValueError(
            f"unknown agent {name!r}; valid: {', '.join(agent_names())} "
            "(or a 'package.module:Class' path)"
        )
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"agent {name!r} cannot be imported from {module_name} ({exc})") from exc
    cls = getattr(module, attr, None)
    if cls is None:
        raise ValueError(f"agent {name!r}: {module_name} has no {attr}")
    return cls  # type: ignore[no-any-return]


def make_agent(name: str, tasks: Sequence[Task] | Mapping[str, Task] | None = None,
               **options: Any) -> Agent:
    """An agent by name, with ``options`` passed to its constructor."""
    cls = agent_class(name)
    params = inspect.signature(cls).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    unknown = sorted(k for k in options if k not in params and not takes_any)
    if unknown:
        valid = sorted(k for k in params if k != "tasks")
        raise ValueError(f"agent {name!r} takes no option {unknown}; its options: {valid}")
    if "tasks" in params:
        options = {**options, "tasks": task_table(tasks)}
    agent = cls(**options)
    if not isinstance(agent, Agent):
        raise ValueError(f"agent {name!r} ({cls.__name__}) has no reset(obs, info) and act(...)")
    return agent  # type: ignore[no-any-return]
