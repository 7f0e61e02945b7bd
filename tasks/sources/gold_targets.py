"""Which functions gold cases are recorded for, on the host: the functions a gold patch changes
or adds (from the patch's hunks and the AST of both versions of each file), and the functions
the tracer saw (keyed by where their code starts) named by qualname for the harness."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from . import pyast
from .common import is_test_path
from .targets import TargetFunction, function_target


@dataclass(frozen=True)
class Place:
    """Where a function's code object starts, as the tracer keys it."""

    path: str  # relative to the repository root
    name: str
    lines: tuple[int, ...]  # the def line and, when decorated, the first decorator's


def _functions(text: str) -> list[pyast.Definition]:
    try:
        module = pyast.parse(text)
    except SyntaxError:
        return []
    return [d for d in pyast.definitions(module) if not d.is_class]


def _start(node: ast.AST) -> int:
    decorators = getattr(node, "decorator_list", [])
    return min([node.lineno, *(d.lineno for d in decorators)])  # type: ignore[attr-defined]


def _enclosing(definitions: list[pyast.Definition], line: int) -> str | None:
    """The qualname of the innermost function (method) whose lines hold ``line``."""
    best: tuple[int, str] | None = None
    for d in definitions:
        start, end = _start(d.node), d.node.end_lineno or d.node.lineno
        if start <= line <= end and (best is None or end - start < best[0]):
            best = (end - start, d.qualname)
    return best[1] if best else None


def patch_paths(patch: str) -> list[str]:
    """The library Python files a patch changes (test files left out)."""
    from unidiff import PatchSet

    found = []
    for patched in PatchSet(patch):
        path = _clean(patched.target_file if not patched.is_removed_file else "")
        if path.endswith(".py") and not is_test_path(path):
            found.append(path)
    return sorted(set(found))


def _clean(path: str) -> str:
    return path[2:] if path.startswith(("a/", "b/")) else path


def changed_functions(patch: str, before: dict[str, str | None], after: dict[str, str | None]
                      ) -> dict[str, list[str]]:
    """Per library file, the qualnames (in the patched version) of the functions the patch
    changes or adds: those holding an added line, and those of the old version holding a
    removed line that the new version still defines."""
    from unidiff import PatchSet

    out: dict[str, list[str]] = {}
    for patched in PatchSet(patch):
        if patched.is_removed_file:
            continue
        path = _clean(patched.target_file)
        if path not in after or after[path] is None:
            continue
        new_defs = _functions(after[path] or "")
        old_defs = _functions(before.get(_clean(patched.source_file)) or "")
        names: set[str] = set()
        for hunk in patched:
            for line in hunk:
                if line.is_added and line.target_line_no:
                    names.add(_enclosing(new_defs, line.target_line_no) or "")
                elif line.is_removed and line.source_line_no:
                    names.add(_enclosing(old_defs, line.source_line_no) or "")
        defined = {d.qualname for d in new_defs}
        found = sorted(n for n in names if n and n in defined)
        if found:
            out[path] = found
    return out


def places(texts: dict[str, str | None], qualnames: dict[str, list[str]]) -> list[Place]:
    """The tracer's places of the named functions (every definition of a name counts)."""
    found = []
    for path, names in qualnames.items():
        for d in _functions(texts.get(path) or ""):
            if d.qualname in names:
                found.append(Place(path, d.node.name, tuple(sorted({d.node.lineno,
                                                                   _start(d.node)}))))
    return found


@dataclass(frozen=True)
class Traced:
    """One function the tracer saw, named for the harness."""

    key: str  # the harness's key: ``module:qualname`` (``#fset``/``#fdel`` for accessors)
    target: TargetFunction
    from_tests: int  # calls made by test code (boundary calls)
    calls: list[dict[str, Any]]
    place: tuple[str, int, str]  # the tracer's key: path, line, name
    tests: tuple[str, ...] = ()  # the names of the test functions that called it


def name_traced(functions: dict[str, dict[str, Any]], calls: dict[str, list[dict[str, Any]]],
                texts: dict[str, str | None]) -> list[Traced]:
    """The tracer's functions (keyed ``path:line:name``) as qualnames, from the AST of the
    files they were traced in. Those the harness could not call by name (nested functions,
    code that is not a definition, a module run as ``__main__``) are left out; a name defined
    twice keeps the definition traced first."""
    index: dict[tuple[str, int, str], pyast.Definition] = {}
    for path in {info["path"] for info in functions.values()}:
        for d in _functions(texts.get(path) or ""):
            for line in {d.node.lineno, _start(d.node)}:
                index.setdefault((path, line, d.node.name), d)
    found: dict[str, Traced] = {}
    for tkey, info in functions.items():
        found_def = index.get((info["path"], info["line"], info["name"]))
        module = info.get("module")
        if found_def is None or not module or module == "__main__":
            continue
        target = function_target(module, found_def.qualname, 0, found_def.node)  # type: ignore[arg-type]
        role = f"#{target.role}" if target.role in ("fset", "fdel") else ""
        key = f"{module}:{found_def.qualname}{role}"
        if key in found:
            continue
        plain = [{"args": c["args"], "kwargs": c["kwargs"]} for c in calls.get(tkey, [])]
        found[key] = Traced(key, target, int(info.get("from_tests", 0)), plain,
                            (info["path"], info["line"], info["name"]),
                            tuple(info.get("tests", ())))
    return list(found.values())
