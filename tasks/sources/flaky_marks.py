"""Tests a project marks flaky itself leave a task's lists.

A test under ``@pytest.mark.flaky`` (pytest-rerunfailures), ``@flaky`` (the flaky package) or
a ``pytestmark`` that holds either, on the test, its class or its module, is one its own
project says may fail by chance: zipp's complexity tests (``big_o``) failed a gold's grade at a
load of 130 and rejected a task whose change they do not test. Such a test cannot decide a
grade, so a candidate made from a repository leaves it out of FAIL_TO_PASS and PASS_TO_PASS
with the reason in ``dropped_tests``, as a test that flipped during validation does
(``repogym.tasks.flaky``); a candidate left with no FAIL_TO_PASS test is rejected. The markers
are read from the test files at the task's snapshot (or base commit), on the host: nothing in
a container decides it. A dataset's own lists (SWE-bench, Harbor) are kept as published.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from repogym import syntax_lock
from repogym.repo import read_at
from repogym.schema import Task

REASON = "flaky: marked so by its project ({mark} in {path})"


def _flaky(node: ast.expr) -> bool:
    """``pytest.mark.flaky``, ``flaky``, either called with arguments."""
    if isinstance(node, ast.Call):
        node = node.func
    return (isinstance(node, ast.Attribute) and node.attr == "flaky") or (
        isinstance(node, ast.Name) and node.id == "flaky")


def _pytestmark(body: list[ast.stmt]) -> bool:
    """Whether a ``pytestmark = ...`` among ``body`` holds a flaky marker."""
    for stmt in body:
        if isinstance(stmt, ast.Assign):
            targets, value = stmt.targets, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets, value = [stmt.target], stmt.value
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in targets):
            items = value.elts if isinstance(value, ast.List | ast.Tuple) else [value]
            if any(_flaky(item) for item in items):
                return True
    return False


def marked_scopes(text: str) -> set[tuple[str, ...]]:
    """The scopes a flaky marker covers in a test file: () for the whole module, else the
    names of a class or function and its enclosing classes. A file that does not parse has
    none."""
    try:
        tree = syntax_lock.parse(text)
    except (SyntaxError, ValueError):
        return set()
    marked: set[tuple[str, ...]] = {()} if _pytestmark(tree.body) else set()

    def visit(body: list[ast.stmt], scope: tuple[str, ...]) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                here = (*scope, node.name)
                if any(_flaky(d) for d in node.decorator_list) or (
                        isinstance(node, ast.ClassDef) and _pytestmark(node.body)):
                    marked.add(here)
                if isinstance(node, ast.ClassDef):
                    visit(node.body, here)

    visit(tree.body, ())
    return marked


def _added_file(test_patch: str, path: str) -> str | None:
    """A test file the task's test patch adds, as it adds it (None when it does not)."""
    match = re.search(rf"^diff --git a/{re.escape(path)} b/{re.escape(path)}\nnew file mode.*?"
                      rf"(?=^diff --git |\Z)", test_patch, re.M | re.S)
    if not match:
        return None
    return "".join(line[1:] + "\n" for line in match.group(0).splitlines()
                   if line.startswith("+") and not line.startswith("+++"))


def marked_flaky(task: Task) -> dict[str, str]:
    """The listed tests of ``task`` its project marks flaky, with the reason for each."""
    if not task.source:
        return {}
    commit = str(task.extra.get("original_commit") or task.base_commit)
    scopes: dict[str, set[tuple[str, ...]]] = {}
    found: dict[str, str] = {}
    for test in (*task.FAIL_TO_PASS, *task.PASS_TO_PASS):
        path, _, rest = test.partition("::")
        if not rest or not path.endswith(".py"):
            continue
        if path not in scopes:
            text = _added_file(task.test_patch, path) or read_at(str(task.source), commit, path)
            scopes[path] = marked_scopes(text) if text else set()
        names = tuple(re.sub(r"\[.*\]$", "", part) for part in rest.split("::"))
        for end in range(len(names) + 1):
            if names[:end] in scopes[path]:
                found[test] = REASON.format(mark="a flaky marker", path=path)
                break
    return found


def without_marked(task: Task) -> tuple[Task | None, str]:
    """``task`` less the listed tests its project marks flaky (see the module), or None and
    why when no FAIL_TO_PASS test is left."""
    marked = marked_flaky(task)
    if not marked:
        return task, ""
    f2p = [t for t in task.FAIL_TO_PASS if t not in marked]
    if not f2p:
        first = sorted(marked)[0]
        return None, (f"every FAIL_TO_PASS test is marked flaky by its project "
                      f"({len(task.FAIL_TO_PASS)}: {first}, {marked[first]})")
    dropped: dict[str, Any] = dict(task.extra.get("dropped_tests") or {})
    dropped.update(marked)
    return Task.from_dict({**task.to_dict(), "FAIL_TO_PASS": f2p,
                           "PASS_TO_PASS": [t for t in task.PASS_TO_PASS if t not in marked],
                           "dropped_tests": dropped}), ""
