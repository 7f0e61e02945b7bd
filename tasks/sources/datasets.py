"""Dataset files of the SWE-bench family, read as published.

Files: JSON (a list or one object), JSON Lines, parquet, a folder of parquet files, a folder
written by ``datasets``' ``save_to_disk`` (one split, or several: ``--dataset-split`` picks
one), and swebench 5 task repositories (``tasks/<instance_id>/task.yaml``, read with swebench's
own ``load_task_repo``).

Rows keep their fields; :func:`normalize` adds the SWE-bench ones the variants spell
differently and says which variant a row is (``flavor``):

- ``swebench`` (has ``base_commit``: SWE-bench, Lite, Verified, SWE-Gym): test lists may be
  JSON strings or lists.
- ``swebench5`` (``eval_script`` and ``image``): the spec is in the row
  (``specs.from_eval_script``).
- ``swe-rebench`` (``install_config``): a swebench 4-style spec per row; ``docker_image``.
- ``swe-smith`` (``image_name``, no ``base_commit``): each instance is a branch of the
  repository; its head (tests removed) is the start, one commit back restores the tests, two
  back is the code before the bug.
- ``r2e-gym`` (``docker_image`` and ``commit_hash``): the fix commit; ``expected_output_json``
  holds the statuses its tests end with.

The dataset's own image name is kept as ``dataset_image`` (see ``--pull``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from repogym.errors import TaskError

from .common import is_test_path, run_git


def load_rows(path: Path, split: str | None = None) -> list[dict[str, Any]]:
    """Every row of a dataset file or folder, as dicts."""
    if not path.exists():
        raise TaskError(f"{path} does not exist: pass a dataset file or folder.")
    if path.is_dir():
        return _load_folder(path, split)
    if path.suffix == ".parquet":
        return _parquet([path])
    return _load_json(path)


def _load_json(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        rows = []
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as err:
                    raise TaskError(f"{path}:{number} is not JSON ({err}).") from err
        return rows
    return data if isinstance(data, list) else [data]


def _parquet(files: list[Path]) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    rows: list[dict[str, Any]] = []
    for file in files:
        rows += pq.read_table(file).to_pylist()
    return rows


def _load_folder(path: Path, split: str | None) -> list[dict[str, Any]]:
    if (path / "tasks").is_dir():  # a swebench 5 task repository
        from swebench.task.repo import load_task_repo

        rows = load_task_repo(path)
        for row in rows:
            row.setdefault("_task_dir", str(path / "tasks" / row["instance_id"]))
        return rows
    if any((path / name).exists() for name in ("dataset_info.json", "dataset_dict.json",
                                                "state.json")):
        return _saved_dataset(path, split)
    files = sorted(path.rglob("*.parquet"))
    if split:
        files = [f for f in files if split in f.name] or files
    if files:
        return _parquet(files)
    raise TaskError(f"{path} holds no dataset: expected parquet files, a folder written by "
                    "datasets' save_to_disk, or a swebench task repository (tasks/<id>/).")


def _saved_dataset(path: Path, split: str | None) -> list[dict[str, Any]]:
    from datasets import Dataset, DatasetDict, load_from_disk

    data = load_from_disk(str(path))
    if isinstance(data, DatasetDict):
        names = sorted(data)
        chosen = split or ("test" if "test" in data else names[0] if len(names) == 1 else None)
        if chosen not in data:
            raise TaskError(f"{path} holds splits {names}: pick one with --dataset-split.")
        data = data[chosen]
    assert isinstance(data, Dataset)
    return [dict(row) for row in data]


# ---------------------------------------------------------------------------- variants


def flavor(row: dict[str, Any]) -> str:
    if "eval_script" in row and "image" in row:
        return "swebench5"
    if "install_config" in row:
        return "swe-rebench"
    if "image_name" in row and "base_commit" not in row:
        return "swe-smith"
    if "docker_image" in row and "commit_hash" in row:
        return "r2e-gym"
    return "swebench"


def swebench_image(instance_id: str, namespace: str | None = None) -> str:
    """The harness's instance image name (``ImageSpec.name``): remote names replace ``__``."""
    key = f"sweb.eval.x86_64.{instance_id}:latest"
    return (f"{namespace}/{key}".replace("__", "_1776_") if namespace else key).lower()


def normalize(row: dict[str, Any]) -> dict[str, Any]:
    """The row with SWE-bench's fields filled in as far as the row alone allows."""
    out = dict(row)
    kind = flavor(row)
    out["flavor"] = kind
    for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        value = out.get(key)
        if value is None:
            out[key] = []
        elif not isinstance(value, (str, list)):
            out[key] = list(value)  # numpy arrays from parquet
    if kind == "swe-smith":
        out["dataset_image"] = row["image_name"]
    elif kind == "r2e-gym":
        out["dataset_image"] = row["docker_image"]
        out.setdefault("repo", row.get("repo_name", ""))
        out.setdefault("instance_id", f"{row.get('repo_name')}__{str(row['commit_hash'])[:12]}")
        out.setdefault("problem_statement", row.get("problem_statement") or row.get("prompt", ""))
    elif kind == "swebench5":
        out["dataset_image"] = row["image"]
    else:
        out["dataset_image"] = (row.get("docker_image") or row.get("image_name")
                                or swebench_image(str(row.get("instance_id", ""))))
    return out


def resolve_branch(instance: dict[str, Any], mirror: Path) -> dict[str, Any]:
    """A SWE-smith instance from its branch: the head is where the agent starts, one commit
    back restores the tests (the test patch), two back is the code before the bug (the gold
    patch reverts the bug)."""
    branch = str(instance["instance_id"])
    head = run_git(mirror, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}",
                   check=False).strip()
    if not head:
        raise TaskError(f"instance branch missing: {branch} is not a branch of {mirror}")
    bug, clean = f"{head}~1", f"{head}~2"
    return {**instance, "base_commit": head,
            "test_patch": _diff(mirror, head, bug),
            "patch": _diff(mirror, bug, clean)}


def resolve_commit(instance: dict[str, Any], mirror: Path) -> dict[str, Any]:
    """An R2E-Gym instance from its fix commit: the agent starts at its parent; the commit's
    test files are the test patch, the rest the gold patch."""
    commit = str(instance["commit_hash"])
    parent = run_git(mirror, "rev-parse", "--verify", "--quiet", f"{commit}^1",
                     check=False).strip()
    if not parent:
        raise TaskError(f"base commit missing: {commit} or its parent is not in {mirror}")
    names = run_git(mirror, "diff", "--name-only", "--no-renames", parent, commit).split("\n")
    tests = [n for n in names if n and is_test_path(n)]
    code = [n for n in names if n and not is_test_path(n)]
    return {**instance, "base_commit": parent,
            "patch": _diff(mirror, parent, commit, code) if code else "",
            "test_patch": _diff(mirror, parent, commit, tests) if tests else ""}


def _diff(mirror: Path, old: str, new: str, paths: list[str] | None = None) -> str:
    args = ["diff", "--no-color", "--no-ext-diff", "--binary", "--no-renames", old, new]
    return run_git(mirror, *args, *(["--", *paths] if paths else []))
