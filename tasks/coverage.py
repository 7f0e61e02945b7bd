"""Which tests a change can reach: a map from tests to the functions they call, and the functions
a change touches.

The map is made once per image by one run of the whole suite under ``coverage_plugin`` (every
function of the library counts its calls, per test). A test that calls none of the functions a
candidate changes runs exactly as before: up to the first changed line it executes, two
versions of the code behave alike, and it never executes one. So only the tests that reach a
changed function can change outcome; a change outside every function body (module code, class
bodies, signatures, decorators, docstrings, non-Python files) may reach every test. Both sides'
changed lines are mapped onto the functions of the version the map was made on (see
``changed_functions``).

What the map cannot see is listed in the manual (docs/adding.md): code run in subprocesses, and
state one test leaves for another (a cache filled by an earlier test). Task creation therefore
confirms every kept task's lists with one full run.
"""

from __future__ import annotations

import ast
import difflib
import json
import random
from collections.abc import Iterable
from dataclasses import dataclass, field

from repogym.tasks.sources.common import is_test_path
from repogym.tasks.sources.pyast import definitions, parse

# A function as the map names it, and as a change names it: (path, the line its code object
# starts on). A decorated function's code starts at its first decorator on Python 3.8+.
Place = tuple[str, int]


@dataclass(frozen=True)
class Change:
    """What a candidate changes, in the coordinates of the code the map was made on."""

    functions: frozenset[Place] = frozenset()
    everywhere: str = ""  # why every test may see the change ("" when none does)


@dataclass(frozen=True)
class CoverageMap:
    """Tests by node id, each with the functions (``Place``) it called."""

    tests: dict[str, frozenset[Place]]
    collection: frozenset[Place] = frozenset()  # called outside any test: imports, collection
    modules: dict[str, str] = field(default_factory=dict)  # top-level package -> its file
    unmapped: frozenset[str] = frozenset()  # library files whose calls were not recorded
    python: str = ""

    @classmethod
    def from_json(cls, text: str) -> CoverageMap:
        data = json.loads(text)
        return cls(
            tests={t: frozenset(_place(k) for k in keys) for t, keys in data["tests"].items()},
            collection=frozenset(_place(k) for k in data.get("collection", [])),
            modules=dict(data.get("modules", {})), unmapped=frozenset(data.get("unmapped", [])),
            python=str(data.get("python", "")))

    def reached_files(self) -> set[str]:
        return {path for places in self.tests.values() for path, _ in places}

    def affected(self, change: Change) -> set[str] | None:
        """The tests that may see ``change``; None when every test may."""
        if change.everywhere or change.functions & self.collection:
            return None
        if any(path in self.unmapped for path, _ in change.functions):
            return None
        return {t for t, places in self.tests.items() if places & change.functions}

    def selection(self, change: Change, sample: int, seed: int = 0
                  ) -> tuple[set[str] | None, list[str]]:
        """(affected tests or None for all, a seeded sample of the other tests)."""
        affected = self.affected(change)
        if affected is None:
            return None, []
        rest = sorted(set(self.tests) - affected)
        return affected, sorted(random.Random(seed).sample(rest, min(sample, len(rest))))


def _place(key: str) -> Place:
    path, line, _name = key.rsplit(":", 2) if key.count(":") >= 2 else (key, "0", "")
    return path, int(line)


# ---------------------------------------------------------------------------- changes


@dataclass(frozen=True)
class _Function:
    qualname: str
    occurrence: int
    starts: frozenset[int]  # where its code object may start: the def, the first decorator
    body: range  # the lines of its body, docstring excluded


def _functions(text: str) -> list[_Function] | None:
    try:
        module = parse(text)
    except SyntaxError:
        return None
    found = []
    for d in definitions(module):
        node = d.node
        if isinstance(node, ast.ClassDef):
            continue
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            body = body[1:]  # the docstring is set when the def runs, not in a call
        first = body[0].lineno if body else (node.end_lineno or node.lineno) + 1
        starts = {node.lineno} | ({min(x.lineno for x in node.decorator_list)}
                                  if node.decorator_list else set())
        found.append(_Function(d.qualname, d.occurrence, frozenset(starts),
                               range(first, (node.end_lineno or node.lineno) + 1)))
    return found


def _innermost(functions: list[_Function], line: int) -> _Function | None:
    inside = [f for f in functions if line in f.body]
    return min(inside, key=lambda f: len(f.body)) if inside else None


def changed_lines(old: str, new: str) -> tuple[set[int], set[int]]:
    """The 1-based lines that differ, on each side (a pure insertion has lines on one side
    only: they name the function it lands in)."""
    a, b = old.splitlines(), new.splitlines()
    left: set[int] = set()
    right: set[int] = set()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            left.update(range(i1 + 1, i2 + 1))
            right.update(range(j1 + 1, j2 + 1))
    return left, right


def changed_functions(path: str, mapped: str, other: str) -> Change:
    """The functions of ``mapped`` (the version the map was made on) that a change to
    ``other`` touches. Every changed line, on either side, must lie in a function body whose
    function ``mapped`` also has; else the change may reach every test."""
    if not path.endswith(".py"):
        return Change(everywhere=f"{path} is not Python")
    if is_test_path(path):
        return Change(everywhere=f"{path} is a test file")
    ours, theirs = _functions(mapped), _functions(other)
    if ours is None or theirs is None:
        return Change(everywhere=f"{path} does not parse")
    by_name = {(f.qualname, f.occurrence): f for f in ours}
    touched: set[Place] = set()
    for side, lines in zip((ours, theirs), changed_lines(mapped, other), strict=True):
        for line in sorted(lines):
            fn = _innermost(side, line)
            target = by_name.get((fn.qualname, fn.occurrence)) if fn else None
            if target is None:
                return Change(everywhere=f"{path}:{line} is outside any function body")
            touched.update((path, start) for start in target.starts)
    return Change(functions=frozenset(touched))


def combine(changes: Iterable[Change]) -> Change:
    functions: set[Place] = set()
    for change in changes:
        if change.everywhere:
            return change
        functions |= change.functions
    return Change(functions=frozenset(functions))
