"""Thin task images (repogym.images.derived): a task made on a snapshot is the snapshot's image
and one layer, which holds what an image built from scratch holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from repogym.images import derived
from repogym.images.recipe import LABEL_COMMIT, has_image
from repogym.images.repository import built_tag, ensure_image, image_tag
from repogym.repo import git
from repogym.sandbox.client import docker_client
from repogym.schema import Environment, Task
from repogym.tasks.sources.common import WorkRepo
from tests.tasks.test_checking import _project, candidates

pytestmark = pytest.mark.docker


def synthetic(tmp_path: Path, package: str, setup: str) -> tuple[Task, WorkRepo]:
    work = WorkRepo.create(_project(tmp_path / "shapes", package), tmp_path / "work")
    task = next(t for t in candidates(work) if t.kind == "synthetic")
    return task.with_(environment=Environment(setup=(setup,))), work


def forget(tag: str) -> None:
    """Removes the tag an earlier run of the test left (the tasks' commits are the same)."""
    if has_image(docker_client(), tag):
        docker_client().images.remove(tag)


def run(tag: str, command: str) -> str:
    out = docker_client().containers.run(tag, ["bash", "-c", command], user="0", remove=True)
    return bytes(out).decode()


def test_a_synthetic_task_gets_its_snapshots_image_and_one_layer(tmp_path: Path) -> None:
    task, work = synthetic(tmp_path, "shapes", "python -m pip install -e .")
    assert derived.derivable(task)
    tag, full = image_tag(task), built_tag(task)
    assert tag != full
    forget(tag)
    thin = ensure_image(task, print)
    assert thin.tag == tag and not thin.cached
    client = docker_client()
    snapshot = client.images.get(built_tag(derived.snapshot_task(task)))
    image = client.images.get(tag)
    layers = image.attrs["RootFS"]["Layers"]
    assert layers[:-1] == snapshot.attrs["RootFS"]["Layers"]  # one layer on the snapshot's
    # what an image built from scratch at the task's commit holds
    scratch = ensure_image(task.with_(extra={**task.extra, "original_commit": ""}), print)
    assert scratch.tag == full
    assert image.labels[LABEL_COMMIT] == client.images.get(full).labels[LABEL_COMMIT]
    changed = [p for _, p in derived.change(task)]
    for path in changed:
        expected = git(work.path, "show", f"{task.base_commit}:{path}")
        assert run(tag, f"cat /testbed/{path}") == expected
        # the snapshot's version of the file is the gold code: no object of it is left
        blob = git(work.path, "rev-parse", f"{work.head}:{path}").strip()
        assert run(tag, f"git -C /testbed cat-file -e {blob} 2>/dev/null && echo kept || "
                        f"echo gone; find /testbed -name '*.pyc' | wc -l") == "gone\n0\n"
    # (the pristine copy first: git status rewrites the index)
    state = run(tag, "cd /testbed && diff -r /testbed /opt/repogym-pristine/testbed && echo same "
                     "&& git rev-list --all | wc -l && git status --porcelain | wc -l && find . "
                     "-path ./.git -prune -o -type f -printf '%T@\\n' | sort -u | wc -l")
    assert state.split() == ["same", "1", "0", "1"], state  # no time tells a changed file
    # the gold patch applies, and the tests the task lists see the change
    assert "ok" in run(tag, f"cd /testbed && printf %s {_quote(task.patch)} | git apply "
                            "--check - && echo ok")


def test_an_installed_copy_of_a_changed_file_builds_the_image_from_scratch(
        tmp_path: Path) -> None:
    task, _ = synthetic(tmp_path, "src/shapes", "python -m pip install .")
    assert derived.derivable(task)
    forget(image_tag(task))
    built = ensure_image(task, lambda _m: None)
    client = docker_client()
    image = client.images.get(image_tag(task))
    assert image.id == client.images.get(built_tag(task)).id  # the full build, both names
    assert built.repo_commit == image.labels[LABEL_COMMIT]


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"
