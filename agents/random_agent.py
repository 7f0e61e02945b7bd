"""``random``: a few random but valid tool calls, then submit. Seeded, so a run repeats.

It exercises every path an untrained policy takes (reads, harmless edits, a diff that applies
but fixes nothing) and gives the resolved rate of chance. Each episode draws from
``Random(f"{seed}:{task_id}")``, so a task's episode does not depend on which worker ran it or
in what order.
"""

from __future__ import annotations

import random
from typing import Any

from repogym.agents.agent import SUBMIT, Action

COMMANDS = ("ls", "pwd", "git status --short", "git ls-files | head -100",
            "python --version", "ls -la", "git log --oneline | head -5")
LIST_FILES = "find . -type f -not -path './.git/*' | sort | head -200"


class RandomAgent:
    """``steps``: how many calls before submitting, drawn from ``[min_steps, max_steps]``."""

    def __init__(self, seed: int = 0, min_steps: int = 1, max_steps: int = 5) -> None:
        if not 0 <= min_steps <= max_steps:
            raise ValueError(
                f"min_steps={min_steps}, max_steps={max_steps}: need 0 <= min_steps <= max_steps"
            )
        self.seed, self.min_steps, self.max_steps = seed, min_steps, max_steps
        self.rng = random.Random(seed)
        self._left = 0
        self._files: list[str] = []
        self._last: Action | None = None

    def reset(self, obs: str, info: dict[str, Any]) -> None:
        self.rng = random.Random(f"{self.seed}:{info.get('task_id')}")
        self._left = self.rng.randint(self.min_steps, self.max_steps)
        self._files = []
        self._last = None

    def act(self, obs: str, info: dict[str, Any]) -> Action:
        listed = self._last == {"tool": "bash", "command": LIST_FILES}
        if listed and info.get("exit_code") == 0:
            self._files = [line.strip() for line in obs.splitlines()
                           if line.strip() and not line.startswith("[")]
        if self._left <= 0:
            return dict(SUBMIT)
        self._left -= 1
        self._last = self._choose()
        return self._last

    def _choose(self) -> dict[str, Any]:
        py_files = [f for f in self._files if f.endswith(".py")]
        kinds = ["bash", "view_dir"] + ["list"] * (not self._files)
        if self._files:
            kinds.append("view_file")
        if py_files:
            kinds.append("insert")
        kind = self.rng.choice(kinds)
        if kind == "list":
            return {"tool": "bash", "command": LIST_FILES}
        if kind == "bash":
            return {"tool": "bash", "command": self.rng.choice(COMMANDS)}
        if kind == "view_dir":
            return {"tool": "view", "path": "."}
        if kind == "view_file":
            return {"tool": "view", "path": self.rng.choice(self._files)}
        # a comment on top changes the diff but not what the module does
        return {"tool": "insert", "path": self.rng.choice(py_files), "insert_line": 0,
                "new_str": f"# random edit {self.rng.randrange(10**6)}\n"}
