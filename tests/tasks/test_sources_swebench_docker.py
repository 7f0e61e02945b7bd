"""SWE-bench-family instances through Docker: a dataset's own image with repogym's layer on
top, and tests that need the network dropped from a task with their reason."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from repogym.images.python_base import ensure_base
from repogym.images.recipe import build_dockerfile, tar_folder
from repogym.images.repository import ensure_image
from repogym.sandbox.client import docker_client
from repogym.schema import Task
from repogym.tasks.sources.common import SourceOptions
from repogym.tasks.sources.swebench import SwebenchOptions, SwebenchSource
from repogym.tasks.validate import validate_task

pytestmark = pytest.mark.docker
GIT = ["git", "-c", "user.name=a", "-c", "user.email=a@b"]
APP = "def add(a, b):\n    return a - b\n"
TESTS = "from app import add\n\n\ndef test_small():\n    assert add(1, 1) == 2\n"
PATCH = """\
diff --git a/app.py b/app.py
--- a/app.py
+++ b/app.py
@@ -1,2 +1,2 @@
 def add(a, b):
-    return a - b
+    return a + b
"""
TEST_PATCH = """\
diff --git a/tests/test_app.py b/tests/test_app.py
--- a/tests/test_app.py
+++ b/tests/test_app.py
@@ -3,3 +3,14 @@ from app import add
 
 def test_small():
     assert add(1, 1) == 2
+
+
+def test_big():
+    assert add(2, 3) == 5
+
+
+def test_online():
+    import socket
+
+    socket.create_connection(("pypi-mirror.invalid", 80), timeout=5)
+    assert add(2, 3) == 5
"""


def repo(root: Path) -> str:
    subprocess.run(["git", "init", "-q", "--initial-branch=main", str(root)], check=True)
    (root / "tests").mkdir()
    (root / "app.py").write_text(APP)
    (root / "tests" / "test_app.py").write_text(TESTS)
    (root / ".gitignore").write_text("build/\n")
    subprocess.run(GIT + ["add", "-A"], cwd=root, check=True)
    subprocess.run(GIT + ["commit", "-qm", "base"], cwd=root, check=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                          text=True, check=True).stdout.strip()


def row(base: str, iid: str, repo_name: str, f2p: list[str]) -> dict[str, Any]:
    return {"repo": repo_name, "instance_id": iid, "base_commit": base, "patch": PATCH,
            "test_patch": TEST_PATCH, "problem_statement": "add subtracts", "version": "1.0",
            "FAIL_TO_PASS": json.dumps(f2p), "PASS_TO_PASS": json.dumps(["tests/test_app.py::"
                                                                        "test_small"])}


def source(tmp_path: Path, rows: list[dict[str, Any]], pull: bool) -> SwebenchSource:
    file = tmp_path / "instances.jsonl"
    file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = None
    if not pull:  # with --pull, the dataset's image is the environment
        env = tmp_path / "env.yaml"
        env.write_text('"*":\n  "*":\n    python: "3.11"\n    test_cmd: python -m pytest -rA\n')
    (tmp_path / "repos").mkdir(exist_ok=True)
    options = SwebenchOptions(file, tmp_path / "repos", env, pull=pull, clone=False)
    return SwebenchSource(options, SourceOptions(runs=1))


def test_tests_that_need_the_network_leave_the_lists_with_their_reason(tmp_path: Path) -> None:
    base = repo(tmp_path / "repos" / "octo__net")
    f2p = ["tests/test_app.py::test_big", "tests/test_app.py::test_online"]
    src = source(tmp_path, [row(base, "octo__net-1", "octo/net", f2p)], pull=False)
    [task] = list(src.candidates())
    assert isinstance(task, Task)
    done, reason = src.check(task)
    assert done is not None, reason
    assert done.FAIL_TO_PASS == ("tests/test_app.py::test_big",)
    why = done.extra["dropped_tests"]["tests/test_app.py::test_online"]
    assert why.startswith("needs the network:") and "gaierror" in why


@pytest.fixture()
def dataset_image(tmp_path: Path) -> Any:
    """An image as a dataset ships it, built here under the harness's name: the repository at
    /testbed with its history, a setup commit on top, and an untracked build artefact."""
    tree = tmp_path / "image" / "testbed"
    base = repo(tree)
    (tree / "build").mkdir()
    (tree / "build" / "artefact.txt").write_text("built\n")
    (tree / "setup.cfg").write_text("[metadata]\nname = app\n")
    subprocess.run(GIT + ["add", "setup.cfg"], cwd=tree, check=True)
    subprocess.run(GIT + ["commit", "-qm", "SWE-bench"], cwd=tree, check=True)
    name = "sweb.eval.x86_64.octo__lay-1:latest"
    client = docker_client()
    dockerfile = (f"FROM {ensure_base('3.11', progress=lambda _m: None).tag}\nUSER root\n"
                  "ADD testbed.tar /testbed\nENV PYTHONPATH=/testbed\n")  # "installed"
    build_dockerfile(client, name, dockerfile, {"testbed.tar": tar_folder(tree)},
                     lambda _m: None)
    yield name, base
    for image in client.images.list(filters={"label": f"org.repogym.layer-of={name}"}):
        client.images.remove(image.id, force=True)
    client.images.remove(name, force=True)


def test_a_datasets_image_gets_repogyms_layer(tmp_path: Path, dataset_image: Any) -> None:
    name, base = dataset_image
    rows = [row(base, "octo__lay-1", "octo/lay", ["tests/test_app.py::test_big"])]
    src = source(tmp_path, rows, pull=True)  # no mirror: the image holds the repository
    [task] = list(src.candidates())
    assert isinstance(task, Task), task
    assert task.environment.image == name and task.source is None
    built = ensure_image(task, progress=lambda _m: None)
    assert built.tag.startswith("repogym/layer:") and len(built.repo_commit) == 40
    script = ("cd /testbed && git rev-list --all | wc -l && git remote | wc -l && "
              "git for-each-ref | wc -l && git status --porcelain --ignored && "
              "stat -c %U /testbed/app.py && test -d /opt/repogym-pristine/testbed && echo ok")
    out = docker_client().containers.run(built.tag, ["bash", "-c", script], remove=True,
                                         user="root", network_mode="none").decode()
    assert out.split("\n")[:3] == ["1", "0", "1"]  # one commit, no remote, one ref
    assert out.split("\n")[3:] == ["!! build/", "repogym", "ok", ""]  # the artefact stays
    result = validate_task(task, runs=1)
    assert result.ok, result.reason
