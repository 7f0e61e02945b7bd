"""A built layer carries its configuration on every engine: the labels the build gave it (the
repository's commit, which an agent's diff is taken against), its command and its working
folder. Podman 4's Docker API ignored a commit's configuration, and every image built there
lacked the commit label: the gold patch, played through gym.make on Podman, was graded as an
empty diff."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest

from repogym.images.build import Layer, _configure, build_layer
from repogym.images.recipe import LABEL_COMMIT
from repogym.images.repository import ensure_image
from repogym.sandbox.client import docker_client
from repogym.schema import Task

pytestmark = pytest.mark.docker


def test_a_layer_has_its_labels_command_and_folder(toy_image: str) -> None:
    tag = f"repogym/test-layer:{uuid.uuid4().hex[:8]}"
    run = build_layer(Layer(
        image=toy_image, tag=tag, workdir="/testbed",
        script=f"echo REPOGYM-LABEL {LABEL_COMMIT}=c0ffee; echo REPOGYM-LABEL other=ignored",
        labels={"org.repogym.test": "layer"}, env=("REPOGYM_TEST_VAR=a b",),
        script_labels=(LABEL_COMMIT,)), progress=lambda _m: None)
    client = docker_client()
    try:
        assert run.exit_code == 0, run.log
        config = client.images.get(tag).attrs["Config"]
        labels = config["Labels"] or {}
        assert labels[LABEL_COMMIT] == "c0ffee" and labels["org.repogym.test"] == "layer"
        assert "other" not in labels and labels.get("org.repogym.role", "") == ""
        assert config["Cmd"] == ["bash"] and config["WorkingDir"] == "/testbed"
        out = client.containers.run(tag, ["bash", "-c", 'echo "$PWD|$REPOGYM_TEST_VAR"'],
                                    remove=True, network_mode="none")
        assert out.decode().strip() == "/testbed|a b"
    finally:
        client.images.remove(tag, force=True)


@pytest.mark.podman
def test_an_image_without_its_commit_label_is_copied_again(
        toy_task: Task, toy_image: str, on_engine: Callable[[str], None]) -> None:
    """On Podman, a copy of the task's image whose labels were lost is replaced by Docker's,
    which has them, instead of being used with no commit to take the agent's diff against."""
    want = docker_client().images.get(toy_image).labels[LABEL_COMMIT]
    on_engine("podman")
    ensure_image(toy_task, progress=lambda _m: None)
    client = docker_client()
    config = client.images.get(toy_image).attrs["Config"]
    _configure(client, client.images.get(toy_image).id, toy_image, {
        "Labels": {**config["Labels"], LABEL_COMMIT: ""}, "Env": config["Env"] or [],
        "Cmd": config["Cmd"], "Entrypoint": config.get("Entrypoint"),
        "WorkingDir": config["WorkingDir"], "User": config.get("User") or ""})
    assert client.images.get(toy_image).labels[LABEL_COMMIT] == ""
    assert ensure_image(toy_task, progress=lambda _m: None).repo_commit == want
    assert client.images.get(toy_image).labels[LABEL_COMMIT] == want
