"""How a source checks its candidates unless told otherwise: the leak check, then the lists."""

from __future__ import annotations

from repogym.schema import Task
from repogym.tasks.validate import derive_lists

from .common import Deriver
from .leak import leak_guard


def default_deriver(runs: int) -> Deriver:
    """A candidate whose image already holds its gold code is rejected (see ``.leak``); the
    others go to ``repogym.tasks.validate.derive_lists`` with ``runs`` runs per side."""
    guard = leak_guard()

    def derive(task: Task) -> tuple[Task | None, str]:
        leak = guard(task)
        if leak is not None:
            return None, leak
        return derive_lists(task, runs=runs)

    return derive
