"""The errors minicalc raises. Every one of them is a :class:`CalcError`."""

from __future__ import annotations

__all__ = ["CalcError", "CalcSyntaxError", "EvalError", "UndefinedNameError"]


class CalcError(Exception):
    """Base class of every minicalc error."""


class CalcSyntaxError(CalcError):
    """The input is not a valid expression.

    ``position`` is the 0-based offset in ``text`` of the character where the problem is.
    """

    def __init__(self, message: str, text: str, position: int) -> None:
        super().__init__(message)
        self.message = message
        self.text = text
        self.position = position

    @property
    def column(self) -> int:
        """The 1-based column of the problem, as editors count."""
        return self.position + 1

    def __str__(self) -> str:
        return f"{self.message} (column {self.column})"

    def pointer(self) -> str:
        """Two lines: the input, and a caret under the offending character."""
        caret = " " * (self.position + 1) + "^"
        return f"{self.text}\n{caret}"

    def pretty(self) -> str:
        """The input, a caret under the offending character, and the message.

        >>> print(CalcSyntaxError("unexpected character '$'", "1 + $", 4).pretty())
        1 + $
            ^
        unexpected character '$'
        """
        return f"{self.pointer()}\n{self.message}"


class EvalError(CalcError):
    """The expression is valid but cannot be evaluated (division by zero, domain error...)."""


class UndefinedNameError(EvalError):
    """The expression uses a name that has no value."""

    def __init__(self, name: str) -> None:
        super().__init__(f"undefined name {name!r}")
        self.name = name
