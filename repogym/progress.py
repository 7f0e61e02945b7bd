"""The one progress type: what long steps (image builds, validation, task sources, benchmarks,
evaluation runs) call with a line saying what they are doing."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias

Progress: TypeAlias = Callable[[str], None]


def quiet(line: str) -> None:
    """A :data:`Progress` that says nothing."""
