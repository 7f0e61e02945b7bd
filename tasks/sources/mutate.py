"""Procedural bugs: small AST rewrites of one function, applied as text edits.

Each operator proposes sites in a function: the text span to replace, the replacement, and the
AST node the function should then contain. ``verify`` keeps a site only if the edited file
compiles, the function parses to exactly the intended tree (so operator precedence never turns
a mutation into something else), and nothing outside the function changed.
"""

from __future__ import annotations

import ast
import functools
import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from . import pyast

# Comparison operators and what each becomes (a boundary or a negation).
FLIP: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}
# Swapping the arguments of these only raises a TypeError: an obvious bug, not a useful one.
NO_SWAP = frozenset({"isinstance", "issubclass", "getattr", "setattr", "hasattr", "super"})
# Conditions that are negated without parentheses (``not`` binds looser than all of these).
ATOMS = (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Compare, ast.Constant)


@dataclass(frozen=True)
class Site:
    """A proposed edit: replace ``node`` by ``new`` (None: delete the statement)."""

    operator: str
    node: ast.AST
    new: ast.AST | None
    start: int
    end: int
    text: str


@dataclass(frozen=True)
class Mutation:
    """One planted bug in ``file``: replace ``text[start:end]`` by ``replacement``."""

    file: str
    qualname: str
    occurrence: int  # which definition of ``qualname`` (see ``pyast.Definition``)
    operator: str
    start: int
    end: int
    replacement: str
    line: int
    expected: str  # digest of the mutated function's tree

    @property
    def key(self) -> str:
        blob = f"{self.file}:{self.start}:{self.end}:{self.replacement}:{self.operator}"
        return hashlib.sha1(blob.encode()).hexdigest()[:8]

    def apply(self, text: str, replacement: str | None = None) -> str:
        new = self.replacement if replacement is None else replacement
        return text[: self.start] + new + text[self.end:]


# ---------------------------------------------------------------------------- operators


def _int_node(value: int) -> ast.expr:
    if value < 0:  # how the parser spells a negative literal
        return ast.UnaryOp(op=ast.USub(), operand=ast.Constant(-value))
    return ast.Constant(value)


def _int_value(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _int_value(node.operand)
        return None if inner is None else -inner
    return None


def _shift(src: pyast.Source, node: ast.expr, delta: int, any_expr: bool = True
           ) -> Iterator[Site]:
    """``node`` plus ``delta``; only names and literals unless ``any_expr`` (an index that
    is an arbitrary expression is more often a mapping key than a position)."""
    value = _int_value(node)
    if value is not None:
        new: ast.expr = _int_node(value + delta)
    elif any_expr or isinstance(node, ast.Name | ast.Attribute):
        new = ast.BinOp(node, ast.Add() if delta > 0 else ast.Sub(), ast.Constant(abs(delta)))
    else:
        return
    yield Site("off_by_one", node, new, src.start(node), src.end(node), ast.unparse(new))


def flip_comparison(src: pyast.Source, node: ast.AST) -> Iterator[Site]:
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            ops = list(node.ops)
            ops[i] = FLIP[type(op)]()
            new = ast.Compare(node.left, ops, node.comparators)
            yield Site("flip_comparison", node, new, src.start(node), src.end(node),
                       ast.unparse(new))


def flip_boolean(src: pyast.Source, node: ast.AST) -> Iterator[Site]:
    if isinstance(node, ast.BoolOp):
        new = ast.BoolOp(ast.Or() if isinstance(node.op, ast.And) else ast.And(), node.values)
        yield Site("flip_boolean", node, new, src.start(node), src.end(node), ast.unparse(new))


def off_by_one(src: pyast.Source, node: ast.AST) -> Iterator[Site]:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id == "range" and 1 <= len(node.args) <= 3 and not node.keywords:
        yield from _shift(src, node.args[0 if len(node.args) == 1 else 1], -1)
    elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
        index = node.slice
        if isinstance(index, ast.Slice):
            if index.lower is not None:
                yield from _shift(src, index.lower, 1)
            if index.upper is not None:
                yield from _shift(src, index.upper, -1)
        else:
            yield from _shift(src, index, 1, any_expr=False)


def swap_arguments(src: pyast.Source, node: ast.AST) -> Iterator[Site]:
    if not isinstance(node, ast.Call) or len(node.args) < 2:
        return
    first, second = node.args[:2]
    name = node.func.id if isinstance(node.func, ast.Name) else ""
    if name in NO_SWAP or any(isinstance(a, ast.Starred) for a in (first, second)):
        return
    if ast.dump(first) == ast.dump(second):
        return
    a, b = src.segment(first), src.segment(second)
    between = src.text[src.end(first):src.start(second)]
    new = ast.Call(node.func, [second, first, *node.args[2:]], node.keywords)
    yield Site("swap_arguments", node, new, src.start(first), src.end(second), b + between + a)


def change_constant(src: pyast.Source, node: ast.AST) -> Iterator[Site]:
    if not isinstance(node, ast.Constant):
        return
    if isinstance(node.value, bool):
        new = ast.Constant(not node.value)
    elif type(node.value) is int:
        new = ast.Constant({0: 1, 1: 0}.get(node.value, node.value + 1))
    else:
        return
    yield Site("change_constant", node, new, src.start(node), src.end(node), repr(new.value))


def invert_condition(src: pyast.Source, node: ast.AST) -> Iterator[Site]:
    if not isinstance(node, ast.If | ast.While | ast.IfExp):
        return
    test = node.test
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        new: ast.expr = test.operand
        text = src.segment(test.operand)
    else:
        new = ast.UnaryOp(ast.Not(), test)
        seg = src.segment(test)
        text = f"not {seg}" if isinstance(test, ATOMS) else f"not ({seg})"
    yield Site("invert_condition", test, new, src.start(test), src.end(test), text)


def _whole_lines(src: pyast.Source, node: ast.stmt) -> tuple[int, int] | None:
    """The span of the lines a statement fills alone (None if it shares a line)."""
    start, end = src.start(node), src.end(node)
    first, after = src.line_start(start), src.line_end(end)
    rest = src.text[end:after].strip()
    if src.text[first:start].strip() or (rest and not rest.startswith("#")):
        return None
    return first, after


def _droppable(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.Expr):
        return isinstance(stmt.value, ast.Call)
    if isinstance(stmt, ast.Assign):
        return all(isinstance(t, ast.Attribute | ast.Subscript) for t in stmt.targets)
    return isinstance(stmt, ast.AugAssign)


def drop_statement(src: pyast.Source, node: ast.AST) -> Iterator[Site]:
    for block in _blocks(node):
        for stmt in block if len(block) > 1 else []:
            span = _whole_lines(src, stmt) if _droppable(stmt) else None
            if span:
                yield Site("drop_statement", stmt, None, span[0], span[1], "")


def remove_early_return(src: pyast.Source, node: ast.AST) -> Iterator[Site]:
    for block in _blocks(node):
        for stmt in block[:-1]:  # a guard that is last in its block is not early
            if isinstance(stmt, ast.If) and not stmt.orelse \
                    and isinstance(stmt.body[-1], ast.Return):
                span = _whole_lines(src, stmt)
                if span:
                    yield Site("remove_early_return", stmt, None, span[0], span[1], "")


def _blocks(node: ast.AST) -> Iterator[list[ast.stmt]]:
    for name in ("body", "orelse", "finalbody"):
        block = getattr(node, name, None)
        if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
            yield block


Operator = Callable[[pyast.Source, ast.AST], Iterator[Site]]
OPERATORS: dict[str, Operator] = {
    "flip_comparison": flip_comparison, "flip_boolean": flip_boolean, "off_by_one": off_by_one,
    "swap_arguments": swap_arguments, "drop_statement": drop_statement,
    "change_constant": change_constant, "invert_condition": invert_condition,
    "remove_early_return": remove_early_return,
}


# ---------------------------------------------------------------------------- sites


def _nodes(fn: pyast.FunctionNode) -> Iterator[ast.AST]:
    """The function's body and everything in it, without its docstring, f-string internals
    (their positions are unreliable before 3.12) and annotations."""
    yield fn
    skip: set[int] = set()
    if pyast.has_docstring(fn):
        skip.add(id(fn.body[0].value))  # type: ignore[attr-defined]
    for stmt in fn.body:
        for node in ast.walk(stmt):
            if id(node) in skip:
                skip.update(id(child) for child in ast.iter_child_nodes(node))
                continue
            if isinstance(node, ast.JoinedStr):
                skip.update(id(n) for n in ast.walk(node))
                continue
            if isinstance(node, ast.AnnAssign):
                skip.update(id(n) for n in ast.walk(node.annotation))
            yield node


def _digest(node: ast.AST) -> str:
    return hashlib.sha1(ast.dump(node).encode()).hexdigest()


def _expected(fn: pyast.FunctionNode, site: Site) -> str | None:
    """The digest of ``fn`` with the site's node replaced (or deleted) in its tree."""
    for parent in ast.walk(fn):
        for name, value in ast.iter_fields(parent):
            if value is site.node:
                setattr(parent, name, site.new)
                try:
                    return _digest(fn)
                finally:
                    setattr(parent, name, value)
            if isinstance(value, list) and any(v is site.node for v in value):
                index = next(i for i, v in enumerate(value) if v is site.node)
                copy = list(value)
                if site.new is None:
                    del copy[index]
                else:
                    copy[index] = site.new
                setattr(parent, name, copy)
                try:
                    return _digest(fn)
                finally:
                    setattr(parent, name, value)
    return None


def function_mutations(file: str, text: str, definition: pyast.Definition,
                       operators: tuple[str, ...]) -> list[Mutation]:
    """Every distinct proposed mutation of one function, in source order (unverified)."""
    fn = definition.node
    assert not isinstance(fn, ast.ClassDef), "mutations are planted in functions"
    src = pyast.Source(text)
    seen: set[tuple[int, int, str]] = set()
    found = []
    for node in _nodes(fn):
        for name in operators:
            for site in OPERATORS[name](src, node):
                key = (site.start, site.end, site.text)
                expected = _expected(fn, site)
                if key in seen or expected is None or expected == _digest(fn):
                    continue
                seen.add(key)
                line = text.count("\n", 0, site.start) + 1
                found.append(Mutation(file, definition.qualname, definition.occurrence, name,
                                      site.start, site.end, site.text, line, expected))
    return sorted(found, key=lambda m: (m.start, m.end, m.operator))


def _blank(module: ast.Module, qualname: str, occurrence: int) -> str:
    node = pyast.find(module, qualname, occurrence)
    body = node.body
    node.body = []
    try:
        return ast.dump(module)
    finally:
        node.body = body


@functools.lru_cache(maxsize=32)
def _blank_original(text: str, qualname: str, occurrence: int) -> str:
    return _blank(pyast.parse(text), qualname, occurrence)


def verify(text: str, mutation: Mutation) -> str | None:
    """The mutated file, or None if it does not compile, is not the intended tree, or changes
    anything outside the function."""
    attempts = [mutation.replacement]
    if mutation.replacement and not mutation.replacement.startswith("("):
        attempts.append(f"({mutation.replacement})")
    for replacement in attempts:
        new_text = mutation.apply(text, replacement)
        try:
            new_module = pyast.parse(new_text)
            fn = pyast.find(new_module, mutation.qualname, mutation.occurrence)
            if _digest(fn) != mutation.expected:
                continue
            # compiling catches what parsing lets through (e.g. a misplaced ``nonlocal``)
            pyast.compile_tree(new_module, mutation.file)
        except (SyntaxError, ValueError, KeyError):
            continue
        where = (mutation.qualname, mutation.occurrence)
        same = _blank_original(text, *where) == _blank(new_module, *where)
        return new_text if same else None
    return None
