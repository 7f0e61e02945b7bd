"""Unchanged agent harnesses playing repogym episodes: the :class:`Shell` they need, a bridge that
makes a harness an agent, and one adapter per harness (mini-swe-agent)."""

from repogym.agents.harness.interface import (
    CommandResult,
    EnvShell,
    Harness,
    HarnessAgent,
    Shell,
    command_result,
)

__all__ = ["CommandResult", "EnvShell", "Harness", "HarnessAgent", "Shell", "command_result"]
