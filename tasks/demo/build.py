"""Builds the demo suite: ``tasks.jsonl`` and ``suite.yaml`` from ``src/`` and ``defs/``.

    .venv/bin/python tasks/demo/build.py           # rewrite tasks.jsonl and suite.yaml
    .venv/bin/python tasks/demo/build.py --check   # exit 1 if they are out of date

``src/<repo>/`` holds each repository's base state, with the bugs of all its tasks in it at
once. ``defs/<instance_id>/`` holds one task: ``problem.md`` (the issue), ``fix.patch`` (the gold
patch, no test files) and ``test.patch`` (the hidden tests, test files only).

The test lists are never written by hand. For every task the base is snapshotted the way the
image builder does it, the test patch applied, and the whole test folder run twice without and
twice with the gold patch; FAIL_TO_PASS is what passes only with the fix, PASS_TO_PASS what passes
both times. A task is refused (``TaskError``) when two runs disagree, when nothing goes from
failing to passing, or when any test fails with the gold patch applied.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, cast

from swebench.harness.log_parsers.python import parse_log_pytest

from repogym.errors import TaskError
from repogym.repo import export_tree, git, snapshot, snapshot_commit

SUITE = Path(__file__).resolve().parent
CREATED_AT = "2024-06-01T00:00:00Z"
SUITE_YAML = """\
# Defaults for every task in tasks.jsonl. Written by build.py: edit that file, not this one.
environment:
  python: "3.11"
  test_cmd: "python -m pytest -rA"
  log_parser: "pytest"
"""
PYTEST_TIMEOUT_S = 300


@dataclass(frozen=True)
class TaskDef:
    """What ``defs/`` cannot say by itself: a task's kind and split."""

    instance_id: str
    kind: str = "swe"
    split: str = "eval"

    @property
    def repo_name(self) -> str:
        """``demo__textkit-3`` -> ``textkit``: the folder under ``src/``."""
        return self.instance_id.split("__", 1)[1].rsplit("-", 1)[0]

    @property
    def folder(self) -> Path:
        return SUITE / "defs" / self.instance_id


TASKS = (
    TaskDef("demo__textkit-1"),
    TaskDef("demo__textkit-2"),
    TaskDef("demo__textkit-3"),
    TaskDef("demo__textkit-4", kind="replication"),
    TaskDef("demo__textkit-5", split="train"),
    TaskDef("demo__minicalc-1"),
    TaskDef("demo__minicalc-2", split="train"),
    TaskDef("demo__minicalc-3"),
    TaskDef("demo__minicalc-4"),
    TaskDef("demo__minicalc-5", kind="replication", split="train"),
    TaskDef("demo__stockroom-1"),
    TaskDef("demo__stockroom-2"),
    TaskDef("demo__stockroom-3", split="train"),
    TaskDef("demo__stockroom-4"),
    TaskDef("demo__stockroom-5", split="train"),
)

_DIFF_HEADER = re.compile(r"^diff --git a/(\S+) b/(\S+)$", re.MULTILINE)
_SUMMARY_COUNT = re.compile(r"(\d+) (passed|failed|errors?)\b")


# --- patches --------------------------------------------------------------------------------


def patch_paths(patch: str) -> list[str]:
    """Every path a ``git diff`` touches, old and new names alike."""
    return sorted({path for pair in _DIFF_HEADER.findall(patch) for path in pair})


def is_test_path(path: str) -> bool:
    """Test files of the demo repositories: everything under ``tests/``."""
    return path.split("/", 1)[0] == "tests"


def check_patches(task: TaskDef, fix: str, tests: str) -> None:
    fix_paths, test_paths = patch_paths(fix), patch_paths(tests)
    if not fix_paths or not test_paths:
        raise TaskError(f"{task.instance_id}: fix.patch and test.patch must both change files.")
    wrong = [p for p in fix_paths if is_test_path(p)] + [
        p for p in test_paths if not is_test_path(p)
    ]
    if wrong:
        raise TaskError(
            f"{task.instance_id}: {wrong} are in the wrong patch: test files belong in "
            "test.patch, everything else in fix.patch."
        )


# --- test runs ------------------------------------------------------------------------------


def run_tests(tree: Path) -> tuple[int, dict[str, str]]:
    """Runs every test file of ``tree``; returns pytest's exit code and each test's status."""
    files = sorted(str(p.relative_to(tree)) for p in (tree / "tests").rglob("test_*.py"))
    command = [sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", "-o", "addopts=",
               *files]
    # Like the grader: no plugins from the host's site-packages, no bytecode left in the tree.
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONHASHSEED": "0"}
    proc = subprocess.run(command, cwd=tree, env=env, capture_output=True, encoding="utf-8",
                          errors="replace", timeout=PYTEST_TIMEOUT_S)
    log = proc.stdout + proc.stderr
    if proc.returncode not in (0, 1):
        raise TaskError(
            f"pytest exited with {proc.returncode} in {tree} (collection or usage error); "
            f"fix the test patch. Log tail:\n{log[-2000:]}"
        )
    statuses = parse_log_pytest(log, cast(Any, None))  # the pytest parser ignores the spec
    _check_counts(log, statuses)
    return proc.returncode, statuses


def _check_counts(log: str, statuses: dict[str, str]) -> None:
    """The parsed statuses must add up to pytest's own summary line.

    A test id with a space in it (a parametrized string) is cut short by the log parser; this is
    where such an id is caught, before it ends up in a test list that can never match.
    """
    summary = next((line for line in reversed(log.splitlines()) if line.startswith("=")), "")
    counts = {"passed": 0, "failed": 0, "error": 0}
    for number, word in _SUMMARY_COUNT.findall(summary):
        counts[word.rstrip("s") if word.startswith("error") else word] += int(number)
    parsed = {
        "passed": sum(s == "PASSED" for s in statuses.values()),
        "failed": sum(s == "FAILED" for s in statuses.values()),
        "error": sum(s == "ERROR" for s in statuses.values()),
    }
    if parsed != counts:
        raise TaskError(
            f"parsed test statuses {parsed} do not match pytest's summary {summary!r}: give "
            "parametrized tests ids without spaces (pytest.param(..., id=...))."
        )


def run_twice(task: TaskDef, tree: Path, label: str) -> tuple[int, dict[str, str]]:
    first, second = run_tests(tree), run_tests(tree)
    if first != second:
        changed = sorted(
            t for t in set(first[1]) | set(second[1]) if first[1].get(t) != second[1].get(t)
        )
        raise TaskError(
            f"{task.instance_id}: two runs {label} disagree on {changed or 'the exit code'}; "
            "make those tests deterministic."
        )
    return first


# --- one task -------------------------------------------------------------------------------


@cache
def base_commit(repo_name: str) -> str:
    return snapshot_commit(SUITE / "src" / repo_name)


def build_task(task: TaskDef) -> dict[str, Any]:
    """Runs the tests of one task and returns its ``tasks.jsonl`` row."""
    fix = (task.folder / "fix.patch").read_text(encoding="utf-8")
    tests = (task.folder / "test.patch").read_text(encoding="utf-8")
    problem = (task.folder / "problem.md").read_text(encoding="utf-8").strip() + "\n"
    check_patches(task, fix, tests)
    with tempfile.TemporaryDirectory(prefix="repogym-demo-") as tmp:
        tree = Path(tmp) / "repo"
        export_tree(SUITE / "src" / task.repo_name, None, tree)
        commit = snapshot(tree)
        if commit != base_commit(task.repo_name):
            raise TaskError(f"{task.instance_id}: the snapshot changed while building; rerun.")
        git(tree, "apply", "-", input=tests.encode())
        _, before = run_twice(task, tree, "without the fix")
        git(tree, "apply", "-", input=fix.encode())
        code, after = run_twice(task, tree, "with the fix")
    not_passing = sorted(t for t, status in after.items() if status != "PASSED")
    if code != 0 or not_passing:
        raise TaskError(
            f"{task.instance_id}: with fix.patch applied these tests still fail: "
            f"{not_passing or '(see exit code ' + str(code) + ')'}; fix the patches."
        )
    fail_to_pass = [t for t in after if before.get(t) != "PASSED"]
    pass_to_pass = [t for t in after if before.get(t) == "PASSED"]
    if not fail_to_pass:
        raise TaskError(
            f"{task.instance_id}: no test fails without the fix, so the task checks nothing; "
            "add a failing test to test.patch."
        )
    return {
        "instance_id": task.instance_id,
        "repo": f"demo/{task.repo_name}",
        "base_commit": commit,
        "problem_statement": problem,
        "patch": fix,
        "test_patch": tests,
        "FAIL_TO_PASS": fail_to_pass,
        "PASS_TO_PASS": pass_to_pass,
        "source": f"src/{task.repo_name}",
        "kind": task.kind,
        "split": task.split,
        "created_at": CREATED_AT,
    }


# --- the suite ------------------------------------------------------------------------------


def check_sources() -> None:
    """Stray files in ``src/`` would change the snapshots, so refuse them up front."""
    stray = [
        p for p in (SUITE / "src").rglob("*")
        if p.name in {".pytest_cache", ".mypy_cache", ".ruff_cache", ".git"}
    ]
    if stray:
        raise TaskError(f"remove {[str(p) for p in stray]}: they would end up in the base commit.")
    names = {p.name for p in (SUITE / "defs").iterdir() if p.is_dir()}
    listed = {t.instance_id for t in TASKS}
    if names != listed:
        raise TaskError(
            f"defs/ and TASKS disagree: only in defs/ {sorted(names - listed)}, only in TASKS "
            f"{sorted(listed - names)}; list every task folder in build.py's TASKS."
        )


def build_rows(workers: int | None = None) -> list[dict[str, Any]]:
    check_sources()
    for name in sorted({t.repo_name for t in TASKS}):
        base_commit(name)  # computed once, before the threads share the cache
    with ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
        return list(pool.map(build_task, TASKS))


def render(rows: list[dict[str, Any]]) -> dict[Path, str]:
    """The suite's files and their content. A task that did not change keeps the certificate
    ``repogym tasks certify`` gave it; a changed one must be certified again."""
    certified = {}
    if (SUITE / "tasks.jsonl").exists():
        for line in (SUITE / "tasks.jsonl").read_text(encoding="utf-8").splitlines():
            old = json.loads(line)
            if "certificate" in old:
                certified[old["instance_id"]] = old
    rows = [{**row, "certificate": certified[row["instance_id"]]["certificate"]}
            if {k: v for k, v in certified.get(row["instance_id"], {}).items()
                if k != "certificate"} == row else row
            for row in rows]
    lines = [json.dumps(row, ensure_ascii=False) for row in rows]
    return {SUITE / "tasks.jsonl": "\n".join(lines) + "\n", SUITE / "suite.yaml": SUITE_YAML}


def summary(rows: list[dict[str, Any]]) -> str:
    header = f"{'instance_id':<20} {'kind':<12} {'split':<6} {'F2P':>4} {'P2P':>4}"
    body = [
        f"{r['instance_id']:<20} {r['kind']:<12} {r['split']:<6} "
        f"{len(r['FAIL_TO_PASS']):>4} {len(r['PASS_TO_PASS']):>4}"
        for r in rows
    ]
    return "\n".join([header, *body])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="do not write; exit 1 if tasks.jsonl or suite.yaml is out of date")
    parser.add_argument("--workers", type=int, default=None, help="tasks built in parallel")
    args = parser.parse_args(argv)
    start = time.monotonic()
    rows = build_rows(args.workers)
    files = render(rows)
    print(summary(rows))
    stale = [
        p.name for p, text in files.items()
        if not p.exists() or p.read_text(encoding="utf-8") != text
    ]
    if args.check:
        print(f"out of date: {stale}; run build.py" if stale else "up to date")
        return 1 if stale else 0
    for path, text in files.items():
        path.write_text(text, encoding="utf-8")
    elapsed = time.monotonic() - start
    print(f"{len(rows)} tasks written to {SUITE / 'tasks.jsonl'} in {elapsed:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
