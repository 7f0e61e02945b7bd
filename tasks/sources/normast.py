"""Functions as normalised token sequences, and an index that finds near-copies among many.

A function's tokens are its syntax tree in order, with what does not change what it does
normalised away: its own name, the names of its parameters and locals (numbered in order of
first use), docstrings, annotations, the text of string constants, formatting and comments.
Names it does not bind (globals, builtins, attributes, keywords) stay as written, since they
say what it calls; an attribute of a global (``operator.itemgetter``) is written as the name
alone, as ``from operator import itemgetter`` would have it. Two spellings of one function
(``try/except: pass`` against ``with suppress``, a renamed parameter) then differ by a few
tokens, and :func:`similarity` (difflib's ratio over the token sequences) stays high.
"""

from __future__ import annotations

import ast
import functools
import hashlib
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from difflib import SequenceMatcher

from .pyast import parse

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


@dataclass(frozen=True)
class Function:
    """One function or method of a file, normalised. What is derived from its tokens is
    computed once per object (the leak check keeps the objects of a file it has parsed)."""

    path: str
    qualname: str
    tokens: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.qualname.rsplit(".", 1)[-1]

    @functools.cached_property
    def tail(self) -> str:
        """Its name, after its class's (a method) or its enclosing function's (a nested one):
        what "the same function" means."""
        parts = [p for p in self.qualname.split(".") if p != "<locals>"]
        return ".".join(parts[-2:])

    @functools.cached_property
    def digest(self) -> str:
        return hashlib.sha1("\n".join(self.tokens).encode()).hexdigest()

    @functools.cached_property
    def identifiers(self) -> frozenset[str]:
        """The names it uses without binding them: what says what it calls."""
        return frozenset(t for t in self.tokens if t.startswith(("N:", "Attr:", "kw:"))
                         and not t.startswith("N:v"))


def functions(text: str, path: str = "") -> list[Function]:
    """Every function and method of a module (nested ones too), normalised; a module that
    does not parse gives none."""
    try:
        tree = parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    out: list[Function] = []
    for qualname, node in _defs(tree, ""):
        try:
            out.append(Function(path, qualname, tuple(tokens(node))))
        except RecursionError:
            continue
    return out


def _defs(node: ast.AST, prefix: str) -> Iterator[tuple[str, FunctionNode]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            qualname = prefix + child.name
            yield qualname, child
            yield from _defs(child, qualname + ".<locals>.")
        elif isinstance(child, ast.ClassDef):
            yield from _defs(child, prefix + child.name + ".")
        elif not isinstance(child, ast.Lambda):
            yield from _defs(child, prefix)


def tokens(fn: FunctionNode) -> list[str]:
    """The normalised token sequence of one function (see the module docstring)."""
    bound = _bound_names(fn)
    numbers: dict[str, str] = {}

    def local(name: str) -> str:
        return numbers.setdefault(name, f"v{len(numbers)}")

    out: list[str] = []
    args = fn.args
    for a in [*args.posonlyargs, *args.args, args.vararg, *args.kwonlyargs, args.kwarg]:
        if a is not None:
            out.append("A:" + local(a.arg))
    for d in [*args.defaults, *(d for d in args.kw_defaults if d is not None)]:
        _emit(d, out, bound, local)
    for d in fn.decorator_list:
        out.append("@")
        _emit(d, out, bound, local)
    for stmt in _body(fn.body):
        _emit(stmt, out, bound, local)
    return out


def _body(body: list[ast.stmt]) -> list[ast.stmt]:
    """A body without its docstring."""
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        return body[1:]
    return body


def _bound_names(fn: FunctionNode) -> set[str]:
    """The names a function binds itself (parameters, assignments, loops, imports...)."""
    names = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            names.add(node.id)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, _SCOPES) and node is not fn and not isinstance(node, ast.Lambda):
            names.add(node.name)
        elif isinstance(node, ast.arg) and node is not fn:
            names.add(node.arg)
    globals_ = {n for node in ast.walk(fn) if isinstance(node, ast.Global | ast.Nonlocal)
                for n in node.names}
    return names - globals_


def _emit(node: ast.AST, out: list[str], bound: set[str], local: Callable[[str], str]
          ) -> None:
    """Appends the tokens of ``node`` and its children, in order."""
    if isinstance(node, ast.Name):
        out.append("N:" + (local(node.id) if node.id in bound else node.id))
        return
    if isinstance(node, ast.Constant):
        value = node.value
        kind = "str" if isinstance(value, str) else "bytes" if isinstance(value, bytes) \
            else repr(value)[:24]
        out.append("C:" + kind)
        return
    if isinstance(node, ast.arg):
        out.append("A:" + local(node.arg))
        return
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and \
            isinstance(node.value.value, str):
        return  # a docstring or a bare string: no code
    if isinstance(node, ast.expr_context):
        return  # Load, Store, Del: said by where the name stands
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
            node.value.id not in bound:
        out.append("N:" + node.attr)  # ``operator.itemgetter`` is ``itemgetter`` imported
        return
    out.append(type(node).__name__)
    if isinstance(node, ast.Attribute):
        out.append("Attr:" + node.attr)
    elif isinstance(node, ast.keyword) and node.arg:
        out.append("kw:" + node.arg)
    elif isinstance(node, ast.alias):
        out.append("imp:" + node.name)
    elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        out.append("def:" + local(node.name))
    elif isinstance(node, ast.ImportFrom):
        out.append(f"from:{node.module}")
    for field, value in ast.iter_fields(node):
        if field in ("annotation", "returns", "type_comment", "type_params"):
            continue  # annotations do not change what it does
        children = value if isinstance(value, list) else [value]
        if field == "body" and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef
                                          | ast.ClassDef):
            children = _body(children)
        for child in children:
            if isinstance(child, ast.AST):
                _emit(child, out, bound, local)


def similarity(a: tuple[str, ...], b: tuple[str, ...]) -> float:
    return SequenceMatcher(None, a, b, autojunk=False).ratio()


class Index:
    """Many functions, found by exact normalised form, by name, or by the names they use.

    Candidates for one query are the functions with the same normalised form, the same name
    (and class, for a method), or at least half of its rarer identifiers in common
    (identifiers used by more than ``common`` functions say too little to count); only those
    are compared token by token."""

    def __init__(self, common: int = 5000) -> None:
        self.functions: list[Function] = []
        self.by_digest: dict[str, list[int]] = defaultdict(list)
        self.by_name: dict[str, list[int]] = defaultdict(list)
        self.by_identifier: dict[str, list[int]] = defaultdict(list)
        self.common = common

    def add(self, fns: list[Function]) -> None:
        for fn in fns:
            i = len(self.functions)
            self.functions.append(fn)
            self.by_digest[fn.digest].append(i)
            self.by_name[fn.tail].append(i)
            for ident in fn.identifiers:
                self.by_identifier[ident].append(i)

    def candidates(self, query: Function) -> list[Function]:
        found = set(self.by_digest.get(query.digest, ())) | set(self.by_name.get(query.tail, ()))
        rare = [t for t in query.identifiers if len(self.by_identifier.get(t, ())) <= self.common]
        if rare:
            counts: dict[int, int] = defaultdict(int)
            for ident in rare:
                for i in self.by_identifier.get(ident, ()):
                    counts[i] += 1
            found |= {i for i, n in counts.items() if 2 * n >= len(rare)}
        return [self.functions[i] for i in sorted(found)]
