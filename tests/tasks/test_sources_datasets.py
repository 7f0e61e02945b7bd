"""Dataset files and the SWE-bench family's field variants, and the spec translation."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from repogym.errors import TaskError
from repogym.schema import Task
from repogym.tasks.sources import specs
from repogym.tasks.sources.common import SourceOptions, reason_kind
from repogym.tasks.sources.datasets import (
    flavor,
    load_rows,
    normalize,
    resolve_branch,
    resolve_commit,
    swebench_image,
)
from repogym.tasks.sources.swebench import SwebenchOptions, SwebenchSource, setup_reason

GIT = ["git", "-c", "user.name=a", "-c", "user.email=a@b"]
ROW = {"repo": "octo/app", "instance_id": "octo__app-1", "base_commit": "a" * 40,
       "patch": "", "test_patch": "", "problem_statement": "p", "version": "1.0",
       "FAIL_TO_PASS": ["tests/test_a.py::test_a"], "PASS_TO_PASS": []}


def commit(root: Path, files: dict[str, str], message: str) -> str:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    subprocess.run(GIT + ["add", "-A"], cwd=root, check=True)
    subprocess.run(GIT + ["commit", "-qm", message], cwd=root, check=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                          text=True, check=True).stdout.strip()


# ---------------------------------------------------------------------------- files


def test_parquet_file_and_folder(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [ROW, {**ROW, "instance_id": "octo__app-2"}]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "test-00000-of-00001.parquet")
    assert load_rows(tmp_path / "test-00000-of-00001.parquet") == rows
    assert load_rows(tmp_path) == rows  # the dataset's data/ folder as downloaded


def test_datasets_save_to_disk_one_split_or_several(tmp_path: Path) -> None:
    from datasets import Dataset, DatasetDict

    Dataset.from_list([ROW]).save_to_disk(str(tmp_path / "one"))
    assert load_rows(tmp_path / "one") == [ROW]
    DatasetDict({"dev": Dataset.from_list([ROW]), "test": Dataset.from_list([ROW, ROW])}
                ).save_to_disk(str(tmp_path / "two"))
    assert len(load_rows(tmp_path / "two")) == 2  # test by default
    assert len(load_rows(tmp_path / "two", "dev")) == 1
    DatasetDict({"a": Dataset.from_list([ROW]), "b": Dataset.from_list([ROW])}
                ).save_to_disk(str(tmp_path / "ab"))
    with pytest.raises(TaskError, match="--dataset-split"):
        load_rows(tmp_path / "ab")
    with pytest.raises(TaskError, match="holds no dataset"):
        load_rows(tmp_path / "one" / "..")


def test_swebench5_task_repository(tmp_path: Path) -> None:
    """swebench 5's own layout, read with its own loader; the spec comes from the eval script."""
    task_dir = tmp_path / "tasks" / "octo__app-1"
    task_dir.mkdir(parents=True)
    (task_dir / "task.yaml").write_text(
        "instance_id: octo__app-1\nrepo: octo/app\nbase_commit: " + "a" * 40 + "\nversion: '1.0'\n"
        "image: sweb.eval.x86_64.octo__app-1:latest\nlog_parser: parse_log_pytest\n"
        "eval_type: pass_and_fail\nsplit: test\n")
    test_patch = "diff --git a/tests/test_a.py b/tests/test_a.py\n"
    eval_sh = ("#!/bin/bash\nset -uxo pipefail\nsource /opt/miniconda3/bin/activate\n"
               "conda activate testbed\ncd /testbed\ngit checkout abc tests/test_a.py\n"
               ": '>>>>> Start Test Output'\npytest -rA tests/test_a.py\n"
               ": '>>>>> End Test Output'\n")
    for name, text in {"gold.patch": "", "test.patch": test_patch, "eval.sh": eval_sh,
                       "problem_statement.md": "p", "Dockerfile": "FROM x\n"}.items():
        (task_dir / name).write_text(text)
    (task_dir / "tests.json").write_text(json.dumps({"FAIL_TO_PASS": ["tests/test_a.py::test_a"],
                                                     "PASS_TO_PASS": []}))
    [row] = load_rows(tmp_path)
    assert flavor(row) == "swebench5" and row["_task_dir"] == str(task_dir)
    env = specs.from_eval_script(normalize(row)).environment
    assert env == {"image": "sweb.eval.x86_64.octo__app-1:latest",
                   "test_cmd": "source /opt/miniconda3/bin/activate && conda activate testbed "
                               "&& pytest -rA",
                   "log_parser": "parse_log_pytest", "test_files": ["tests/test_a.py"]}


# ---------------------------------------------------------------------------- variants


def test_swe_gym_and_swe_rebench_rows(tmp_path: Path) -> None:
    gym = normalize({**ROW})  # SWE-Gym: lists are lists, the harness image name applies
    assert gym["flavor"] == "swebench"
    assert gym["dataset_image"] == "sweb.eval.x86_64.octo__app-1:latest"
    assert swebench_image("a__b-1", "swebench") == "swebench/sweb.eval.x86_64.a_1776_b-1:latest"
    rebench = normalize({**ROW, "install_config": {"python": "3.10", "install": "pip install .",
                                                   "test_cmd": "pytest -rA"},
                         "docker_image": "swerebench/sweb.eval.x86_64.octo_1776_app-1"})
    assert rebench["flavor"] == "swe-rebench"
    assert rebench["dataset_image"] == "swerebench/sweb.eval.x86_64.octo_1776_app-1"


def test_swe_smith_instances_are_branches(tmp_path: Path) -> None:
    repo = tmp_path / "swesmith__octo__app.1234"
    subprocess.run(["git", "init", "-q", "--initial-branch=main", str(repo)], check=True)
    commit(repo, {"app.py": "def add(a, b):\n    return a + b\n",
                  "tests/test_app.py": "from app import add\n\n\ndef test_add():\n"
                                       "    assert add(1, 2) == 3\n"}, "clean")
    subprocess.run(["git", "checkout", "-qb", "octo__app.1234.func_pm_op__x1"], cwd=repo,
                   check=True)
    commit(repo, {"app.py": "def add(a, b):\n    return a - b\n"}, "bug")
    subprocess.run(["git", "rm", "-q", "tests/test_app.py"], cwd=repo, check=True)
    head = commit(repo, {}, "Remove F2P Tests")
    row = normalize({"instance_id": "octo__app.1234.func_pm_op__x1",
                     "repo": "swesmith/octo__app.1234", "patch": "(the bug)",
                     "FAIL_TO_PASS": ["tests/test_app.py::test_add"], "PASS_TO_PASS": [],
                     "image_name": "jyangballin/swesmith.x86_64.octo_1776_app.1234",
                     "problem_statement": "add subtracts"})
    assert row["flavor"] == "swe-smith"
    assert row["dataset_image"] == "jyangballin/swesmith.x86_64.octo_1776_app.1234"
    done = resolve_branch(row, repo)
    assert done["base_commit"] == head
    assert "+def test_add" in done["test_patch"]  # the removed tests come back
    assert "-    return a - b\n+    return a + b" in done["patch"]  # the gold undoes the bug
    with pytest.raises(TaskError, match="instance branch missing"):
        resolve_branch({**row, "instance_id": "nope"}, repo)


def test_r2e_gym_rows_split_their_commit(tmp_path: Path) -> None:
    repo = tmp_path / "app"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    parent = commit(repo, {"app.py": "X = 1\n", "tests/test_app.py": "def test_x(): pass\n"}, "a")
    fix = commit(repo, {"app.py": "X = 2\n", "tests/test_app.py": "def test_y(): pass\n"}, "b")
    row = normalize({"repo_name": "app", "docker_image": "namanjain12/app_final:" + fix,
                     "commit_hash": fix, "problem_statement": "X is wrong",
                     "expected_output_json": json.dumps({"test_y": "PASSED"})})
    assert row["flavor"] == "r2e-gym" and row["instance_id"] == f"app__{fix[:12]}"
    done = resolve_commit(row, repo)
    assert done["base_commit"] == parent
    assert "app.py" in done["patch"] and "tests/" not in done["patch"]
    assert "tests/test_app.py" in done["test_patch"] and "X = 2" not in done["test_patch"]


def test_r2e_row_becomes_a_task_with_lists_to_measure(tmp_path: Path) -> None:
    repos = tmp_path / "repos"
    (repos / "app").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repos / "app")], check=True)
    commit(repos / "app", {"app.py": "X = 1\n", "pyproject.toml": "[project]\nname='app'\n"},
           "a")
    fix = commit(repos / "app", {"app.py": "X = 2\n", "tests/test_app.py": "def test(): 0\n"},
                 "b")
    row = {"repo_name": "app", "docker_image": "img:1", "commit_hash": fix,
           "problem_statement": "X", "expected_output_json": "{}"}
    file = tmp_path / "r2e.jsonl"
    file.write_text(json.dumps(row) + "\n")
    src = SwebenchSource(SwebenchOptions(file, repos, validate=False, clone=False),
                         SourceOptions())
    [task] = list(src.candidates())
    assert isinstance(task, Task) and task.FAIL_TO_PASS == ()
    assert task.extra["dataset_flavor"] == "r2e-gym"
    assert task.extra["environment_source"]["from"] == "detected from the repository's files"


# ---------------------------------------------------------------------------- translation


def test_nearest_python() -> None:
    assert specs.nearest_python("3.9") == ["3.9"]
    assert specs.nearest_python("3.6")[0] == "3.9"
    assert specs.nearest_python("3.10")[:2] == ["3.9", "3.11"]  # a tie: the older first
    assert specs.nearest_python("3.12")[:2] == ["3.11", "3.13"]


def translate(spec: dict[str, Any], python: str | None = None) -> specs.Translated:
    return specs.translate(spec, "octo/app", None, "a" * 40, python)


def test_translation_of_the_spec_keys() -> None:
    got = translate({"python": "3.7", "packages": "numpy=1.19 'pandas<2' pytest",
                     "pip_packages": ["attrs==23.1.0"], "pre_install": ["apt-get -y install x"],
                     "install": "python -m pip install .", "test_cmd": "pytest -rA",
                     "eval_commands": ["export LANG=C.UTF-8"], "nano_cpus": 2})
    # the packages make the shared environment image; what edits or installs the
    # repository runs in the task's own layer (without a mirror there is no env_commit)
    assert got.environment == {
        "python": "3.9",
        "env_setup": [specs.INDEX_AS_OF, specs.BUILD_TOOLS,
                      "python -m pip install numpy==1.19 'pandas<2' pytest",
                      "python -m pip install attrs==23.1.0"],
        "setup": ["apt-get -y install x", "python -m pip install -e ."],
        "test_cmd": "export LANG=C.UTF-8 && pytest -rA", "build_tools": True}
    notes = got.provenance["notes"]
    assert got.provenance["python_requested"] == "3.7"
    assert "Python 3.7 has no base image here; built with 3.9" in notes
    assert any("made editable" in n for n in notes)
    assert translate({"python": "3.7"}, python="3.11").environment["python"] == "3.11"


def test_a_setup_failure_without_the_specs_python_says_so() -> None:
    """astropy__astropy-6938 asks for Python 3.6, which has no base image: its setup fails
    with 3.9, which is no fault of the instance's and none repogym can mend by retrying."""
    def task(python: str) -> Task:
        got = translate({"python": python, "install": "python -m pip install -e ."})
        return Task.from_dict({"instance_id": "o__r-1", "repo": "o/r", "base_commit": "a" * 40,
                               "problem_statement": "p", "patch": "diff",
                               "environment": got.environment,
                               "environment_source": got.provenance})

    reason = setup_reason(task("3.6"), "setup fails on this snapshot: error: old numpy")
    assert reason == ("setup fails without the spec's Python (3.6 requested, no base image "
                      "for it; built with 3.9): error: old numpy")
    assert reason_kind(reason) == "setup fails without the spec's Python"
    assert setup_reason(task("3.6"), "tests time out") == "tests time out"
    assert setup_reason(task("3.9"), "setup fails: x") == "setup fails: x"
    assert reason_kind("setup fails: x") == "setup fails"


def test_gold_failing_is_tried_again_with_the_install_dated(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The retry's wiring, on stand-in validations: the first (today's packages) fails, the
    dated one resolves; the task kept is the dated one, and says so."""
    from repogym.tasks.sources import swebench
    from repogym.tasks.validate import Validation

    repos = tmp_path / "repos"
    (repos / "octo__app").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repos / "octo__app")], check=True)
    base = commit(repos / "octo__app", {"setup.py": "from setuptools import setup\nsetup()\n"},
                  "a")
    row = {**ROW, "base_commit": base, "patch": "diff --git a/x b/x\n",
           "install_config": {"python": "3.9", "install": "python -m pip install -e ."}}
    file = tmp_path / "lite.jsonl"
    file.write_text(json.dumps(row) + "\n")
    seen: list[str] = []

    def validate(task: Task, runs: int = 2, grader: Any = None) -> Validation:
        dated = "PIP_UPLOADED_PRIOR_TO" in task.environment.setup[-1]
        seen.append("dated" if dated else "today")
        return Validation(task.instance_id, dated, "ok" if dated else
                          "gold does not resolve it (failing: ['t'])", [dated], [False], [], 1.0)

    monkeypatch.setattr(swebench, "validate_task", validate)
    src = SwebenchSource(SwebenchOptions(file, repos, clone=False), SourceOptions(runs=1))
    src.guard = lambda _task: None
    src._without_network_tests = lambda t, r: (t, r)  # type: ignore[method-assign]
    [task] = list(src.candidates())
    assert isinstance(task, Task)
    kept, reason = src.check(task)
    assert seen == ["today", "dated"] and kept is not None, reason
    assert reason.startswith("ok (the project's install dated to ")
    assert "export PIP_UPLOADED_PRIOR_TO=" in kept.environment.setup[-1]


def test_setuptools_scm_projects_get_the_instance_version(tmp_path: Path) -> None:
    # the image's history has no tags: setuptools_scm would say 0.1.dev1, and pytest's own
    # `minversion = "2.0"` then refuses to run its tests
    mirror = tmp_path / "m"
    subprocess.run(["git", "init", "-q", str(mirror)], check=True)
    spec = {"python": "3.9", "install": "python -m pip install -e ."}
    scm = commit(mirror, {"pyproject.toml": '[tool.setuptools_scm]\nwrite_to = "v.py"\n'},
                 "scm")
    got = specs.translate(spec, "octo/app", mirror, scm, version="8.0")
    assert got.environment["setup"] == [
        "export SETUPTOOLS_SCM_PRETEND_VERSION=8.0; python -m pip install -e ."]
    assert got.environment["env_commit"] == scm  # its install is pre-run there
    assert any("setuptools_scm given" in n for n in got.provenance["notes"])
    plain = commit(mirror, {"pyproject.toml": "[project]\nname = 'app'\n"}, "plain")
    same = specs.translate(spec, "octo/app", mirror, plain, version="8.0")
    assert same.environment["setup"] == ["python -m pip install -e ."]


def test_what_cannot_be_built_here_is_refused() -> None:
    with pytest.raises(specs.SpecError, match="conda"):
        translate({"python": "3.9", "packages": "environment.yml"})
    with pytest.raises(specs.SpecError, match="not found in the mirror"):
        translate({"python": "3.9", "packages": "requirements.txt"})
    with pytest.raises(specs.SpecError, match="does not know"):
        translate({"python": "3.9", "bogus": 1})
    assert "C, PHP or Ruby" in specs.unknown_spec_reason("redis/redis", "1.0")
    assert "known: 4731" in specs.unknown_spec_reason("axios/axios", "1.0")
    assert "known: " in specs.unknown_spec_reason("pallets/flask", "0.1")


def test_published_data_matches_the_wheel_it_came_from() -> None:
    data = specs.published()
    assert data["swebench"] == "4.1.0"
    assert specs.harness_spec("psf/requests", "2.4") == {
        "install": "python -m pip install .", "packages": "pytest", "python": "3.9",
        "test_cmd": "pytest -rA"}
    assert data["reqs_paths"]["pallets/flask"] == ["requirements/dev.txt"]
    assert specs.harness_spec("pytest-dev/pytest", "6.3")["pre_install"] == [
        "sed -i 's/>=>=/>=/' setup.cfg"]
