"""Evaluates syntax trees."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from minicalc.errors import EvalError, UndefinedNameError
from minicalc.nodes import Assign, Binary, Call, Name, Node, Number, Unary

__all__ = ["CONSTANTS", "FUNCTIONS", "Evaluator", "Function"]

Value = int | float


@dataclass(frozen=True)
class Function:
    """A callable the expressions may use, with the number of arguments it accepts."""

    implementation: Callable[..., Value]
    min_args: int
    max_args: int | None  # None: any number

    def check_arity(self, name: str, count: int) -> None:
        if count < self.min_args or (self.max_args is not None and count > self.max_args):
            raise EvalError(f"{name}() takes {self._expected()}, got {count}")

    def _expected(self) -> str:
        if self.max_args is None:
            return f"at least {self.min_args} argument{'s' if self.min_args != 1 else ''}"
        if self.min_args == self.max_args:
            return f"{self.min_args} argument{'s' if self.min_args != 1 else ''}"
        return f"{self.min_args} to {self.max_args} arguments"


FUNCTIONS: dict[str, Function] = {
    "sqrt": Function(math.sqrt, 1, 1),
    "abs": Function(abs, 1, 1),
    "round": Function(round, 1, 2),
    "floor": Function(math.floor, 1, 1),
    "ceil": Function(math.ceil, 1, 1),
    "exp": Function(math.exp, 1, 1),
    "log": Function(math.log, 1, 2),
    "sin": Function(math.sin, 1, 1),
    "cos": Function(math.cos, 1, 1),
    "tan": Function(math.tan, 1, 1),
    "hypot": Function(math.hypot, 2, None),
    "min": Function(min, 1, None),
    "max": Function(max, 1, None),
}

CONSTANTS: dict[str, Value] = {"pi": math.pi, "e": math.e, "tau": math.tau}

_BINARY: dict[str, Callable[[Value, Value], Value]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "//": operator.floordiv,
    "%": operator.mod,
    "**": operator.pow,
}

# Results beyond this many digits are almost always a typo, and computing them can hang.
MAX_INT_DIGITS = 4000


class Evaluator:
    """Evaluates syntax trees against a set of variables.

    Variables shadow constants; assignments (:class:`~minicalc.nodes.Assign`) write to
    ``variables``.
    """

    def __init__(self, variables: Mapping[str, Value] | None = None) -> None:
        self.variables: dict[str, Value] = dict(variables or {})

    def evaluate(self, node: Node) -> Value:
        if isinstance(node, Number):
            return node.value
        if isinstance(node, Name):
            return self.lookup(node.name)
        if isinstance(node, Unary):
            value = self.evaluate(node.operand)
            return -value if node.operator == "-" else +value
        if isinstance(node, Binary):
            return self.binary(node.operator, self.evaluate(node.left), self.evaluate(node.right))
        if isinstance(node, Call):
            return self.call(node.function, [self.evaluate(arg) for arg in node.arguments])
        if isinstance(node, Assign):
            value = self.evaluate(node.value)
            self.variables[node.target] = value
            return value
        raise TypeError(f"not a syntax tree node: {node!r}")

    def lookup(self, name: str) -> Value:
        if name in self.variables:
            return self.variables[name]
        if name in CONSTANTS:
            return CONSTANTS[name]
        raise UndefinedNameError(name)

    def binary(self, operator_: str, left: Value, right: Value) -> Value:
        if operator_ == "/" and right == 0:
            raise EvalError("division by zero")
        if operator_ == "**" and isinstance(left, int) and isinstance(right, int):
            _check_power_size(left, right)
        try:
            result = _BINARY[operator_](left, right)
        except OverflowError:
            raise EvalError(f"result of {operator_!r} is too large") from None
        if isinstance(result, complex):
            raise EvalError("result is a complex number (negative base, fractional exponent)")
        return result

    def call(self, name: str, arguments: list[Value]) -> Value:
        function = FUNCTIONS.get(name)
        if function is None:
            raise UndefinedNameError(name)
        function.check_arity(name, len(arguments))
        try:
            return function.implementation(*arguments)
        except ValueError as error:
            raise EvalError(f"{name}(): {error}") from None
        except OverflowError:
            raise EvalError(f"{name}(): result is too large") from None


def _check_power_size(base: int, exponent: int) -> None:
    if abs(base) > 1 and exponent * math.log10(abs(base)) > MAX_INT_DIGITS:
        raise EvalError(f"result of {base} ** {exponent} has more than {MAX_INT_DIGITS} digits")
