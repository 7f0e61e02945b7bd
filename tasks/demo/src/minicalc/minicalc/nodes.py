"""The syntax tree the parser builds and the evaluator walks."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Assign", "Binary", "Call", "Name", "Node", "Number", "Unary", "to_source"]


@dataclass(frozen=True)
class Number:
    value: int | float


@dataclass(frozen=True)
class Name:
    name: str


@dataclass(frozen=True)
class Unary:
    operator: str
    operand: Node


@dataclass(frozen=True)
class Binary:
    operator: str
    left: Node
    right: Node


@dataclass(frozen=True)
class Call:
    function: str
    arguments: tuple[Node, ...]


@dataclass(frozen=True)
class Assign:
    target: str
    value: Node


Node = Number | Name | Unary | Binary | Call | Assign


def to_source(node: Node) -> str:
    """Writes ``node`` back as a fully parenthesised expression (handy in tests and debugging).

    >>> from minicalc.parser import parse
    >>> to_source(parse("1 + 2 * x"))
    '(1 + (2 * x))'
    """
    if isinstance(node, Number):
        return repr(node.value)
    if isinstance(node, Name):
        return node.name
    if isinstance(node, Unary):
        return f"({node.operator}{to_source(node.operand)})"
    if isinstance(node, Binary):
        return f"({to_source(node.left)} {node.operator} {to_source(node.right)})"
    if isinstance(node, Call):
        return f"{node.function}({', '.join(to_source(arg) for arg in node.arguments)})"
    return f"{node.target} = {to_source(node.value)}"
