"""Procedural bugs in Go, JavaScript, TypeScript, Rust and Java: one token of one function
rewritten, the sites found with tree-sitter's parsers (the grammars from the package index).

The rewrites are the ones ``mutate`` makes in Python where a token says it all: a comparison's
boundary or sense (``<`` to ``<=``, ``==`` to ``!=``), ``&&`` and ``||`` swapped, ``+`` and
``-`` swapped, a boolean literal negated, an integer literal off by one. ``verify`` keeps a
site only if the edited file still parses without an error node and the edit stays inside its
function; whether it compiles is for the tests' run to say (a candidate whose tests no longer
build breaks every test and is dropped).
"""

from __future__ import annotations

import hashlib
import importlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

# the module and function of each language's grammar
GRAMMARS = {
    "go": ("tree_sitter_go", "language"),
    "javascript": ("tree_sitter_javascript", "language"),
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "rust": ("tree_sitter_rust", "language"),
    "java": ("tree_sitter_java", "language"),
}
SUFFIXES = {
    "go": (".go",), "javascript": (".js", ".mjs", ".cjs"), "typescript": (".ts", ".mts"),
    "rust": (".rs",), "java": (".java",),
}
_JS_FUNCTIONS = frozenset({"function_declaration", "method_definition", "function_expression",
                           "arrow_function", "generator_function_declaration", "function"})
FUNCTIONS = {
    "go": frozenset({"function_declaration", "method_declaration"}),
    "javascript": _JS_FUNCTIONS, "typescript": _JS_FUNCTIONS,
    "rust": frozenset({"function_item"}),
    "java": frozenset({"method_declaration", "constructor_declaration"}),
}
COMPARISON = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "==",
              "===": "!==", "!==": "==="}
BOOLEAN_OPS = {"&&": "||", "||": "&&"}
ARITHMETIC = {"+": "-", "-": "+"}
BOOLEANS = {"true": "false", "false": "true"}
INTEGER_TYPES = frozenset({"int_literal", "number", "integer_literal", "decimal_integer_literal"})
OPERATORS = ("flip_comparison", "swap_boolean_operator", "swap_arithmetic", "negate_boolean",
             "off_by_one")


@dataclass(frozen=True)
class Mutation:
    """Replace bytes ``start:end`` of ``file`` (inside ``function``) by ``new``."""

    file: str
    qualname: str
    operator: str
    start: int
    end: int
    old: str
    new: str
    line: int
    func_start: int
    func_end: int

    @property
    def key(self) -> str:
        digest = hashlib.sha1(f"{self.file}:{self.start}:{self.new}".encode()).hexdigest()
        return digest[:10]


@cache
def parser(language: str) -> Any:
    """A tree-sitter parser for ``language``."""
    if language not in GRAMMARS:
        raise ValueError(f"no grammar for {language!r}; valid: {sorted(GRAMMARS)}")
    import tree_sitter

    module, function = GRAMMARS[language]
    grammar = getattr(importlib.import_module(module), function)()
    return tree_sitter.Parser(tree_sitter.Language(grammar))


def is_source(language: str, path: str) -> bool:
    return path.endswith(SUFFIXES.get(language, ())) and not path.endswith(".d.ts")


def function_mutations(language: str, path: str, text: str,
                       operators: tuple[str, ...] = OPERATORS) -> list[list[Mutation]]:
    """Every site in each function of ``text``, one list per function (nested functions
    count once: as part of the outermost)."""
    data = text.encode()
    tree = parser(language).parse(data)
    if tree.root_node.has_error:
        return []
    found = []
    for func in _functions(tree.root_node, FUNCTIONS[language]):
        name = _name(func, data)
        sites = [m for m in _sites(language, path, func, data, name) if m.operator in operators]
        if sites:
            found.append(sites)
    return found


def verify(language: str, text: str, mutation: Mutation) -> str | None:
    """The mutated text, or None if it no longer parses or the function moved."""
    data = text.encode()
    if data[mutation.start:mutation.end].decode() != mutation.old:
        return None
    new = data[:mutation.start] + mutation.new.encode() + data[mutation.end:]
    tree = parser(language).parse(new)
    if tree.root_node.has_error:
        return None
    shift = len(mutation.new.encode()) - (mutation.end - mutation.start)
    span = (mutation.func_start, mutation.func_end + shift)
    if not any((f.start_byte, f.end_byte) == span
               for f in _functions(tree.root_node, FUNCTIONS[language])):
        return None
    return new.decode()


def function_source(text: str, mutation: Mutation) -> str:
    return text.encode()[mutation.func_start:mutation.func_end].decode()


def _functions(root: Any, kinds: frozenset[str]) -> Iterator[Any]:
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type in kinds:
            if not _is_test(node):
                yield node
            continue
        stack.extend(reversed(node.children))


def _is_test(node: Any) -> bool:
    """Rust's tests live beside the code: a ``#[test]`` function, or one in a
    ``#[cfg(test)]`` module, is a test, never a mutation site."""
    while node is not None:
        attribute = node.prev_named_sibling
        while attribute is not None and attribute.type == "attribute_item":
            text = attribute.text.decode("utf-8", "replace") if attribute.text else ""
            if re.search(r"\btest\b", text):
                return True
            attribute = attribute.prev_named_sibling
        node = node.parent
    return False


def _name(func: Any, data: bytes) -> str:
    node = func.child_by_field_name("name")
    if node is None and func.parent is not None:  # const f = () => ...
        node = func.parent.child_by_field_name("name")
    name = _text(node, data) if node is not None else "<anonymous>"
    receiver = func.child_by_field_name("receiver")  # Go methods
    if receiver is not None:
        kind = re.findall(r"\w+", _text(receiver, data))
        name = f"{kind[-1]}.{name}" if kind else name
    return name


def _text(node: Any, data: bytes) -> str:
    return data[node.start_byte:node.end_byte].decode("utf-8", "replace")


def _sites(language: str, path: str, func: Any, data: bytes, name: str) -> Iterator[Mutation]:
    def site(operator: str, node: Any, new: str) -> Mutation:
        return Mutation(path, name, operator, node.start_byte, node.end_byte, _text(node, data),
                        new, node.start_point[0] + 1, func.start_byte, func.end_byte)

    body = func.child_by_field_name("body")
    if body is None:
        return
    stack = [body]
    while stack:
        node = stack.pop()
        stack.extend(reversed(node.children))
        if node.type == "binary_expression":
            op = node.child_by_field_name("operator")
            if op is None:
                continue
            token = _text(op, data)
            if token in COMPARISON:
                yield site("flip_comparison", op, COMPARISON[token])
            elif token in BOOLEAN_OPS:
                yield site("swap_boolean_operator", op, BOOLEAN_OPS[token])
            elif token in ARITHMETIC and not _stringy(node, data):
                yield site("swap_arithmetic", op, ARITHMETIC[token])
        elif node.child_count == 0 and _text(node, data) in BOOLEANS and node.type in (
                "true", "false", "boolean_literal"):
            yield site("negate_boolean", node, BOOLEANS[_text(node, data)])
        elif node.type == "boolean_literal" and _text(node, data) in BOOLEANS:  # rust
            yield site("negate_boolean", node, BOOLEANS[_text(node, data)])
        elif node.type in INTEGER_TYPES and re.fullmatch(r"\d{1,4}", _text(node, data)):
            yield site("off_by_one", node, str(int(_text(node, data)) + 1))


def _stringy(node: Any, data: bytes) -> bool:
    """A ``+`` joining text (a string on either side): ``-`` would not compile or be NaN."""
    for child in node.children:
        if "string" in child.type or "template" in child.type:
            return True
        if child.type == "binary_expression" and _stringy(child, data):
            return True
    return False
