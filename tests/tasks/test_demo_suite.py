"""The demo suite: its tasks parse, its patches apply to its bases, its lists are sound."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from unidiff import PatchSet

import repogym.tasks
from repogym.errors import TaskError
from repogym.repo import export_tree, snapshot, snapshot_commit
from repogym.schema import Task
from repogym.suite import load_suite

SUITE = Path(repogym.tasks.__file__).resolve().parent / "demo"
ROWS: list[dict[str, Any]] = [
    json.loads(line)
    for line in (SUITE / "tasks.jsonl").read_text(encoding="utf-8").splitlines()
    if line.strip()
]
IDS = [row["instance_id"] for row in ROWS]
TEST_ID = re.compile(r"^tests/[\w/]+\.py::\S+$")


def by_id(instance_id: str) -> dict[str, Any]:
    return next(row for row in ROWS if row["instance_id"] == instance_id)


def touched(patch: str) -> list[str]:
    """Paths a patch changes, read with unidiff (independently of build.py's own parsing)."""
    return [f.path for f in PatchSet(patch)]


def is_test_file(path: str) -> bool:
    return path.startswith("tests/")


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One snapshot per demo repository, made the way images are made."""
    trees = {}
    for source in sorted({row["source"] for row in ROWS}):
        tree = tmp_path_factory.mktemp("base") / "repo"
        export_tree(SUITE / source, None, tree)
        snapshot(tree)
        trees[source] = tree
    return trees


def test_every_row_is_a_task() -> None:
    tasks = [Task.from_dict(row, base_dir=SUITE) for row in ROWS]
    for task in tasks:
        assert task.source is not None and Path(task.source).is_dir(), task.instance_id
        assert task.created_at == ROWS[0]["created_at"]


def test_suite_folder_loads_with_its_defaults() -> None:
    tasks = load_suite("demo")
    assert [t.instance_id for t in tasks] == IDS
    env = tasks[0].environment
    assert (env.python, env.test_cmd, env.log_parser) == ("3.11", "python -m pytest -rA", "pytest")
    assert {t.split for t in load_suite("demo", split="train")} == {"train"}


def test_suite_is_big_and_varied_enough() -> None:
    assert len(ROWS) >= 12
    assert len(set(IDS)) == len(IDS)
    assert len({row["repo"] for row in ROWS}) >= 3
    assert {row["split"] for row in ROWS} == {"train", "eval"}
    assert "replication" in {row["kind"] for row in ROWS}
    multi_file_fixes = [i for i in IDS if len(touched(by_id(i)["patch"])) >= 2]
    assert multi_file_fixes


def test_test_patches_add_new_files_including_fixtures() -> None:
    added = [f.path for row in ROWS for f in PatchSet(row["test_patch"]) if f.is_added_file]
    assert any(path.endswith(".py") for path in added)
    assert any(not path.endswith(".py") for path in added)


@pytest.mark.parametrize("source", sorted({row["source"] for row in ROWS}))
def test_base_commit_is_the_snapshot_of_the_source(source: str) -> None:
    commit = snapshot_commit(SUITE / source)
    assert {row["base_commit"] for row in ROWS if row["source"] == source} == {commit}


@pytest.mark.parametrize("instance_id", IDS)
def test_patches_apply_to_the_base(instance_id: str, bases: dict[str, Path]) -> None:
    row = by_id(instance_id)
    for key in ("patch", "test_patch"):
        proc = subprocess.run(
            ["git", "apply", "--check", "-"],
            cwd=bases[row["source"]],
            input=row[key].encode(),
            capture_output=True,
        )
        assert proc.returncode == 0, f"{key}: {proc.stderr.decode()}"


@pytest.mark.parametrize("instance_id", IDS)
def test_gold_patch_touches_code_and_test_patch_touches_tests(instance_id: str) -> None:
    row = by_id(instance_id)
    code, tests = touched(row["patch"]), touched(row["test_patch"])
    assert code and not any(is_test_file(p) for p in code), code
    assert tests and all(is_test_file(p) for p in tests), tests


@pytest.mark.parametrize("instance_id", IDS)
def test_test_lists(instance_id: str) -> None:
    row = by_id(instance_id)
    f2p, p2p = row["FAIL_TO_PASS"], row["PASS_TO_PASS"]
    assert f2p, "a task must have a failing test"
    assert not set(f2p) & set(p2p)
    bad = [t for t in f2p + p2p if not TEST_ID.match(t)]
    assert not bad, f"test ids that a log parser cannot match: {bad}"


@pytest.mark.parametrize("instance_id", IDS)
def test_rows_match_their_definitions(instance_id: str) -> None:
    row, folder = by_id(instance_id), SUITE / "defs" / instance_id
    assert row["patch"] == (folder / "fix.patch").read_text(encoding="utf-8")
    assert row["test_patch"] == (folder / "test.patch").read_text(encoding="utf-8")
    problem = (folder / "problem.md").read_text(encoding="utf-8")
    assert row["problem_statement"] == problem.strip() + "\n"


def test_replication_tasks_restore_a_stubbed_body() -> None:
    for row in ROWS:
        if row["kind"] != "replication":
            continue
        removed = [
            line.value.strip()
            for patched in PatchSet(row["patch"])
            for hunk in patched
            for line in hunk
            if line.is_removed
        ]
        assert removed == ["raise NotImplementedError"], row["instance_id"]


def load_build() -> ModuleType:
    """tasks/demo/build.py, a script rather than a module of the package."""
    spec = importlib.util.spec_from_file_location("repogym_demo_build", SUITE / "build.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_build_reproduces_a_row() -> None:
    build = load_build()
    task = next(t for t in build.TASKS if t.instance_id == "demo__textkit-1")
    row = by_id("demo__textkit-1")
    # the certificate is earned against the attacks (`tasks certify`), not built
    assert build.build_task(task) == {k: v for k, v in row.items() if k != "certificate"}


def test_build_refuses_patches_in_the_wrong_place() -> None:
    build = load_build()
    row = by_id("demo__textkit-1")
    with pytest.raises(TaskError, match="wrong patch"):
        build.check_patches(build.TaskDef("demo__textkit-1"), row["test_patch"], row["test_patch"])


@pytest.mark.slow
def test_build_refuses_a_task_whose_tests_already_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build = load_build()
    shutil.copytree(SUITE / "src" / "textkit", tmp_path / "src" / "textkit")
    folder = tmp_path / "defs" / "demo__textkit-99"
    folder.mkdir(parents=True)
    (folder / "problem.md").write_text("Nothing is wrong.\n")
    (folder / "fix.patch").write_text(by_id("demo__textkit-1")["patch"])
    (folder / "test.patch").write_text(
        "diff --git a/tests/test_more.py b/tests/test_more.py\n"
        "new file mode 100644\n"
        "--- /dev/null\n"
        "+++ b/tests/test_more.py\n"
        "@@ -0,0 +1,2 @@\n"
        "+def test_nothing_to_fix():\n"
        "+    assert True\n"
    )
    monkeypatch.setattr(build, "SUITE", tmp_path)
    with pytest.raises(TaskError, match="no test fails without the fix"):
        build.build_task(build.TaskDef("demo__textkit-99"))
