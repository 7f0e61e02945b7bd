"""``gold``: applies the task's reference patch through the environment's own tools, then
submits. Its resolved rate is the ceiling (1.0 on a valid suite); anything less points at the
task, its image or the grader, not at an agent.

The patch goes in the way any agent's edit would: ``create`` writes it to a file outside the
repository, ``bash`` runs ``git apply``. So a gold run exercises the same tools, diff and
grading path as a real agent.
"""

from __future__ import annotations

import shlex
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from repogym.agents.agent import Action, AgentError, ScriptedAgent, task_table
from repogym.schema import Task


class GoldAgent(ScriptedAgent):
    """Needs the tasks (``tasks=``) to look the patch up by ``info["task_id"]``."""

    def __init__(self, tasks: Sequence[Task] | Mapping[str, Task] | None = None) -> None:
        super().__init__()
        self.tasks = task_table(tasks)

    def script(self, obs: str, info: dict[str, Any]) -> list[Action]:
        task_id = info.get("task_id")
        task = self.tasks.get(str(task_id))
        if task is None:
            raise AgentError(
                f"the gold agent has no task {task_id!r}: create it with tasks=[...] holding "
                "the suite's tasks (the eval runner does this)."
            )
        if not task.patch.strip():
            raise AgentError(f"task {task.instance_id} has no gold patch to apply.")
        # a fresh name: a pooled container may still hold an earlier episode's file
        path = f"/tmp/repogym-gold-{uuid.uuid4().hex[:8]}.patch"
        text = task.patch if task.patch.endswith("\n") else task.patch + "\n"
        return [
            {"tool": "create", "path": path, "file_text": text},
            {"tool": "bash", "command": f"git apply --whitespace=nowarn {shlex.quote(path)} "
                                       f"&& rm -f {shlex.quote(path)}"},
        ]
