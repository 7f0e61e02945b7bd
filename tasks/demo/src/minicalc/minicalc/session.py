"""A calculator session: variables persist from one line to the next."""

from __future__ import annotations

from collections.abc import Mapping

from minicalc.evaluator import Evaluator, Value
from minicalc.formatting import format_number
from minicalc.parser import parse

__all__ = ["Session", "evaluate"]


def evaluate(expression: str, variables: Mapping[str, Value] | None = None) -> Value:
    """Evaluates one expression (no assignment) with the given variables.

    >>> evaluate("2 * x + 1", {"x": 20})
    41
    """
    return Evaluator(variables).evaluate(parse(expression))


class Session:
    """Runs one line at a time; assignments persist and ``ans`` is the last result."""

    def __init__(self, variables: Mapping[str, Value] | None = None) -> None:
        self.evaluator = Evaluator(variables)
        self.history: list[tuple[str, Value]] = []

    @property
    def variables(self) -> dict[str, Value]:
        return self.evaluator.variables

    def run(self, line: str) -> Value:
        value = self.evaluator.evaluate(parse(line, allow_assignment=True))
        self.variables["ans"] = value
        self.history.append((line, value))
        return value

    def display(self, line: str) -> str:
        """Runs ``line`` and returns its result formatted for people."""
        return format_number(self.run(line))
