"""Python syntax trees built one thread at a time.

CPython 3.11 keeps the depth of the tree it is converting (C to Python objects in
``ast.parse``, and back in ``compile`` of a tree) in state the interpreter shares, so two
threads doing it at once can fail with "SystemError: AST constructor recursion depth mismatch"
(python/cpython#106905). ``repogym tasks add --workers 2`` parses in several threads (making
candidates, detecting a project's setup, reading gold cases' inputs, the reward's checks): every
such call of repogym's goes through here, and so does a library that parses on its own
(hypothesis reads its tests' and lambdas' source with ``ast.parse``: ``held()``). Code sent
into containers runs in a process of its own and parses as it likes.
"""

from __future__ import annotations

import ast
import threading
from collections.abc import Iterator
from contextlib import contextmanager

# reentrant: code run under ``held()`` may parse through here too
_LOCK = threading.RLock()


@contextmanager
def held() -> Iterator[None]:
    """The lock, for a block whose library code parses on its own (hypothesis)."""
    with _LOCK:
        yield


def parse(text: str | bytes, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse`` of a module, one thread at a time."""
    with _LOCK:
        return ast.parse(text, filename, "exec")


def parse_expression(text: str, filename: str = "<unknown>") -> ast.Expression:
    """``ast.parse(text, mode="eval")``, one thread at a time."""
    with _LOCK:
        return ast.parse(text, filename, "eval")


def compile_tree(tree: ast.Module, filename: str) -> object:
    """``compile`` of a module's tree, one thread at a time (it converts the tree back)."""
    with _LOCK:
        return compile(tree, filename, "exec", dont_inherit=True)
