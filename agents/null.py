"""``null``: submits at once. Its resolved rate is the floor every task must stay above (0)."""

from __future__ import annotations

from repogym.agents.agent import ScriptedAgent


class NullAgent(ScriptedAgent):
    """Submits the untouched repository."""
