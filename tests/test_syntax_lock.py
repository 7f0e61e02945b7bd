"""Syntax trees in repogym's own process are built one thread at a time
(``repogym.syntax_lock``): CPython 3.11 shares the converter's depth between threads, and
``tasks add --workers 2`` failed with "SystemError: AST constructor recursion depth mismatch"."""

from __future__ import annotations

import ast
import threading
from pathlib import Path

from repogym import syntax_lock

ROOT = Path(__file__).resolve().parents[1]
# code that runs in a process of its own inside containers (sent there as files)
IN_CONTAINERS = {"envs/grading/plant.py", "envs/grading/disguise.py",
                 "envs/grading/harness_plugin.py", "envs/grading/collector.py",
                 "tasks/coverage_plugin.py"}
SKIP = ("build/", "site/", "tests/", ".venv/", "agents/attacks/payloads/", "tools/")


def _host_modules() -> list[Path]:
    out = []
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(SKIP) or rel in IN_CONTAINERS or "/." in f"/{rel}":
            continue
        out.append(path)
    return out


def _builds_trees(tree: ast.AST) -> list[int]:
    """Lines that call ``ast.parse`` or ``compile`` of a tree outside the lock."""
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if (isinstance(func, ast.Attribute) and func.attr == "parse"
                and isinstance(func.value, ast.Name) and func.value.id == "ast"):
            lines.append(node.lineno)
    return lines


def test_every_tree_repogym_builds_in_its_process_takes_the_lock() -> None:
    found = {}
    for path in _host_modules():
        rel = path.relative_to(ROOT).as_posix()
        if rel == "repogym/syntax_lock.py":
            continue
        lines = _builds_trees(ast.parse(path.read_text(encoding="utf-8")))
        if lines:
            found[rel] = lines
    assert not found, f"ast.parse outside repogym.syntax_lock (use syntax_lock.parse): {found}"


def test_parses_from_many_threads_at_once_all_succeed() -> None:
    deep = "x = " + "(" * 80 + "1" + ")" * 80 + "\n"
    text = "".join(f"def f{i}():\n    return [{i}, {{'a': ({i},)}}]\n" for i in range(200)) + deep
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(30):
                compile_ok = syntax_lock.compile_tree(syntax_lock.parse(text), "<t>")
                assert compile_ok is not None
                assert isinstance(syntax_lock.parse_expression("a | None").body, ast.BinOp)
        except BaseException as exc:  # noqa: BLE001  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:1]
