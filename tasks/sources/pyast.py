"""Python source surgery that leaves every byte outside the edited span as it was.

Nodes are located with the positions ``ast`` records (columns are UTF-8 byte offsets), edits
are made on the text, so comments and formatting elsewhere in the file survive.
"""

from __future__ import annotations

import ast
import bisect
import re
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath

from repogym import syntax_lock

from .common import is_test_path


def parse(text: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse``, one thread at a time (``repogym.syntax_lock``)."""
    return syntax_lock.parse(text, filename)


def compile_tree(tree: ast.Module, filename: str) -> object:
    """``compile`` of a tree, one thread at a time (it converts the tree back)."""
    return syntax_lock.compile_tree(tree, filename)


FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef
DefNode = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef

# Folders and files that are not the library: documentation, examples, packaging scripts.
SKIP_DIRS = frozenset({
    "doc", "docs", "example", "examples", "benchmark", "benchmarks", "build", "dist",
    "site-packages", "node_modules", "venv", "tools", "scripts", "ci",
})
SKIP_FILES = frozenset({
    "setup.py", "conftest.py", "noxfile.py", "fabfile.py", "_version.py", "version.py",
    "__main__.py",
})
STUB = "raise NotImplementedError"


def library_files(paths: Iterable[str]) -> list[str]:
    """The non-test Python modules of a repository, sorted."""
    found = []
    for path in paths:
        parts = PurePosixPath(path).parts
        if not path.endswith(".py") or is_test_path(path) or parts[-1] in SKIP_FILES:
            continue
        if any(p.startswith(".") or p.lower() in SKIP_DIRS for p in parts[:-1]):
            continue
        found.append(path)
    return sorted(found)


def module_name(path: str) -> str:
    parts = list(PurePosixPath(path).with_suffix("").parts)
    if parts and parts[0] in ("src", "lib"):
        parts = parts[1:]
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


class Source:
    """A file's text with ``ast`` positions mapped to string offsets."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]

    def offset(self, lineno: int, col: int) -> int:
        start = self._starts[lineno - 1]
        end = self._starts[lineno] if lineno < len(self._starts) else len(self.text)
        line = self.text[start:end]
        return start + len(line.encode("utf-8")[:col].decode("utf-8", errors="ignore"))

    def start(self, node: ast.AST) -> int:
        """Where a statement starts, counting its decorators."""
        decorators = getattr(node, "decorator_list", None)
        if decorators:
            first = decorators[0]
            return self.text.rfind("@", 0, self.offset(first.lineno, first.col_offset))
        return self.offset(node.lineno, node.col_offset)  # type: ignore[attr-defined]

    def end(self, node: ast.AST) -> int:
        return self.offset(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]

    def segment(self, node: ast.AST) -> str:
        return self.text[self.start(node):self.end(node)]

    def line_start(self, offset: int) -> int:
        return self._starts[bisect.bisect_right(self._starts, offset) - 1]

    def line_end(self, offset: int) -> int:
        """The offset just past the newline of the line holding ``offset``."""
        index = bisect.bisect_right(self._starts, offset)
        return self._starts[index] if index < len(self._starts) else len(self.text)

    def dedented(self, start: int, end: int) -> str:
        """Text from ``start`` to ``end`` with the first line's indentation removed."""
        indent = self.text[self.line_start(start):start]
        if indent.strip():  # the node follows other code on its line (``class A: x = 1``)
            indent = " " * len(indent)
        return textwrap.dedent(indent + self.text[start:end])


def replace_spans(text: str, edits: Iterable[tuple[int, int, str]]) -> str:
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text


@dataclass(frozen=True)
class Definition:
    qualname: str  # ``Class.method`` or ``function``
    node: DefNode
    occurrence: int = 0  # earlier definitions with the same name (overloads, property setters)

    @property
    def is_class(self) -> bool:
        return isinstance(self.node, ast.ClassDef)


def definitions(module: ast.Module) -> list[Definition]:
    """Top-level functions and classes, and the methods and classes inside classes, in order.
    Functions nested in functions are part of their outer function."""
    found: list[Definition] = []
    seen: dict[str, int] = {}

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                qualname = prefix + node.name
                seen[qualname] = seen.get(qualname, -1) + 1
                found.append(Definition(qualname, node, seen[qualname]))
                if isinstance(node, ast.ClassDef):
                    visit(node.body, f"{prefix}{node.name}.")

    visit(module.body, "")
    return found


def find(module: ast.Module, qualname: str, occurrence: int = 0) -> DefNode:
    for definition in definitions(module):
        if definition.qualname == qualname and definition.occurrence == occurrence:
            return definition.node
    raise KeyError(qualname if not occurrence else f"{qualname} (definition {occurrence + 1})")


def functions_in(node: DefNode) -> list[FunctionNode]:
    """The node itself if it is a function, else every method in the class (nested too)."""
    if not isinstance(node, ast.ClassDef):
        return [node]
    found: list[FunctionNode] = []
    for child in node.body:
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            found.append(child)
        elif isinstance(child, ast.ClassDef):
            found += functions_in(child)
    return found


def has_docstring(fn: DefNode) -> bool:
    first = fn.body[0]
    return isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
        and isinstance(first.value.value, str)


def code_body(fn: FunctionNode) -> list[ast.stmt]:
    """The body without its docstring."""
    return fn.body[1:] if has_docstring(fn) else list(fn.body)


def is_trivial(fn: FunctionNode) -> bool:
    """A body that is already a stub: ``pass``, ``...`` or a lone ``raise NotImplementedError``."""
    body = code_body(fn)
    if not body:
        return True
    if len(body) > 1:
        return False
    stmt = body[0]
    if isinstance(stmt, ast.Pass):
        return True
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
        return True
    if isinstance(stmt, ast.Raise) and stmt.exc is not None:
        exc = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
        return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"
    return False


def body_lines(fn: FunctionNode) -> int:
    body = code_body(fn)
    return (body[-1].end_lineno or body[-1].lineno) - body[0].lineno + 1 if body else 0


def stub_bodies(src: Source, functions: Iterable[FunctionNode]) -> str:
    """The file with each function's code body (not its signature, decorators or docstring)
    replaced by ``raise NotImplementedError``."""
    edits = []
    for fn in functions:
        body = code_body(fn)
        if body and not is_trivial(fn):
            edits.append((src.start(body[0]), src.end(body[-1]), STUB))
    return replace_spans(src.text, edits)


def signature(src: Source, fn: DefNode) -> str:
    """Decorators and the ``def``/``class`` line(s), dedented, without the body."""
    return src.dedented(src.start(fn), src.start(fn.body[0])).rstrip()


def source_of(src: Source, node: ast.AST) -> str:
    """A definition's whole text (decorators included), dedented."""
    return src.dedented(src.start(node), src.end(node))
