"""One image layer made by running a script in a container and committing it.

``docker build`` would bake every file it is given into some layer, so a CA bundle handed to a
build would end up in the image (and, through the build context, in what decides its id).
Here the build-only files (the CA bundle, the setup checker) are copied into the container
under :data:`BUILD_DIR`, the script removes that folder before it exits, and only what is left
is committed: the image holds none of it, whatever CA was used. The committed image gets
exactly the configuration asked for (labels, environment, working folder): nothing of the
build container's own (its owner labels) leaks into containers later started from it.
"""

from __future__ import annotations

import io
import json
import tarfile
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import docker.errors

from repogym.errors import DockerUnavailable, ImageBuildError
from repogym.progress import Progress
from repogym.sandbox.client import UNREACHABLE, docker_client
from repogym.sandbox.features import engine_features
from repogym.sandbox.owners import owner_labels

BUILD_DIR = "/run/repogym-build"  # build-only files; the script removes it before exiting
LABEL_BUILD = "org.repogym.role"


@dataclass(frozen=True)
class Layer:
    """What to run on top of ``image`` and what the committed image is."""

    image: str  # the image to start from
    tag: str  # where the result is committed
    script: str  # run by bash as root; it must remove BUILD_DIR before it exits
    files: Mapping[str, bytes] = field(default_factory=dict)  # absolute path -> content
    archives: tuple[tuple[str, bytes], ...] = ()  # (folder, tar) unpacked there before the run
    labels: Mapping[str, str] = field(default_factory=dict)  # added to the image's own
    env: tuple[str, ...] = ()  # NAME=value set in the committed image (the build sees them too)
    workdir: str = "/"
    # labels whose value only the script knows: it prints ``REPOGYM-LABEL name=value`` (the
    # last such line of a name wins; a name not listed here is ignored)
    script_labels: tuple[str, ...] = ()
    timeout: float = 3600.0  # seconds the script may run

    def __post_init__(self) -> None:
        if self.timeout <= 0:
            raise ValueError(f"timeout={self.timeout}: give a positive number of seconds.")
        outside = [p for p in self.files if not p.startswith("/")]
        if outside:
            raise ValueError(f"files {outside}: give absolute paths.")


@dataclass(frozen=True)
class LayerRun:
    """How the script ended (the image is committed only when ``exit_code`` is 0)."""

    exit_code: int
    log: str
    seconds: float
    labels: dict[str, str] = field(default_factory=dict)  # what the script set (script_labels)


def build_layer(layer: Layer, progress: Progress = print) -> LayerRun:
    """Runs ``layer.script`` in a fresh container of ``layer.image`` (with network) and, when
    it exits 0, commits the container as ``layer.tag``. The container is always removed."""
    client = docker_client()
    start = time.monotonic()
    try:
        base = client.images.get(layer.image)
    except docker.errors.ImageNotFound as exc:
        raise ImageBuildError(f"cannot build {layer.tag}: image {layer.image} is missing") from exc
    container = None
    try:
        container = client.containers.create(
            layer.image, command=["bash", "-c", layer.script], user="0",
            working_dir=layer.workdir, environment=list(layer.env),
            network_mode=engine_features(client).network,
            labels=build_labels(),
            name=f"repogym-build-{uuid.uuid4().hex[:10]}")
        if layer.files:
            container.put_archive("/", _tar(layer.files))
        for folder, archive in layer.archives:
            container.put_archive(folder, archive)
        container.start()
        exit_code = _wait(container, layer)
        log = container.logs(stdout=True, stderr=True).decode("utf-8", "replace")
        labels = script_labels(log, layer.script_labels)
        if exit_code == 0:
            _commit(container, base, layer, labels)
        return LayerRun(exit_code, log, time.monotonic() - start, labels)
    except UNREACHABLE as exc:
        raise DockerUnavailable(f"building {layer.tag}: {exc}") from exc
    except docker.errors.APIError as exc:
        raise ImageBuildError(f"building {layer.tag} failed: {exc}") from exc
    finally:
        if container is not None:
            _remove(container)


def build_labels() -> dict[str, str]:
    """The build container's labels: its owner, so a crashed build's container is removed by
    ``repogym doctor --cleanup`` like any other."""
    return {**owner_labels(), LABEL_BUILD: "build"}


def _wait(container: Any, layer: Layer) -> int:
    try:
        return int(container.wait(timeout=layer.timeout)["StatusCode"])
    except UNREACHABLE as exc:
        if not _running(container):
            raise
        container.kill()
        tail = container.logs(tail=30).decode("utf-8", "replace")
        raise ImageBuildError(
            f"building {layer.tag} ran over {layer.timeout:.0f} s and was stopped; its output "
            f"ends:\n{tail}") from exc


def _running(container: Any) -> bool:
    try:
        container.reload()
    except docker.errors.DockerException:
        return False
    return bool(container.attrs.get("State", {}).get("Running"))


def script_labels(log: str, names: tuple[str, ...]) -> dict[str, str]:
    """The labels the script printed as ``REPOGYM-LABEL name=value``, of ``names`` only."""
    found: dict[str, str] = {}
    for line in log.splitlines():
        if line.startswith("REPOGYM-LABEL "):
            name, _, value = line[len("REPOGYM-LABEL "):].partition("=")
            if name in names:
                found[name] = value.strip()
    return found


def _commit(container: Any, base: Any, layer: Layer, labels: dict[str, str]) -> None:
    """Commits with an explicit configuration. The engine adds the build container's own
    labels to the image's, and containers started from an image inherit its labels: the
    owner labels are blanked (a blank owner is never taken for a dead one, see
    :mod:`repogym.sandbox.owners`), so no later container passes for this build's."""
    config = base.attrs.get("Config") or {}
    env = _merge_env(config.get("Env") or [], layer.env)
    repository, _, tag = layer.tag.rpartition(":")
    blank = {key: "" for key in build_labels()}
    conf = {
        "Labels": {**blank, **(config.get("Labels") or {}), **layer.labels, **labels},
        "Env": env,
        "Cmd": config.get("Cmd") or ["bash"],
        "Entrypoint": config.get("Entrypoint"),
        "WorkingDir": layer.workdir,
        "User": config.get("User") or "",
    }
    image = container.commit(repository=repository, tag=tag, conf=conf)
    if not _holds(image.attrs.get("Config") or {}, conf):
        _configure(container.client, image.id, layer.tag, conf)


def _holds(config: dict[str, Any], conf: dict[str, Any]) -> bool:
    """Whether the committed image's configuration is ``conf`` (Podman 4's Docker API ignores
    a commit's configuration: the image kept the build container's command and labels, and
    lacked the repository's commit label, so an agent's diff was taken against nothing)."""
    labels = config.get("Labels") or {}
    return (all(labels.get(k) == v for k, v in conf["Labels"].items())
            and (config.get("Cmd") or None) == (conf["Cmd"] or None)
            and (config.get("WorkingDir") or "") == conf["WorkingDir"])


def _configure(client: Any, image_id: str, tag: str, conf: dict[str, Any]) -> None:
    """Gives image ``image_id`` the configuration ``conf`` under ``tag`` by a build of no
    steps but the configuration's, which every engine honours."""
    lines = [f"FROM {image_id}",
             "LABEL " + " ".join(f"{json.dumps(k)}={json.dumps(v)}"
                                 for k, v in sorted(conf["Labels"].items())),
             "ENV " + " ".join(f"{name}={json.dumps(value)}" for name, _, value in
                               (item.partition("=") for item in conf["Env"])) if conf["Env"]
             else "",
             f"ENTRYPOINT {json.dumps(conf['Entrypoint'] or [])}",  # before CMD: it resets CMD
             f"CMD {json.dumps(conf['Cmd'])}",
             f"WORKDIR {conf['WorkingDir']}" if conf["WorkingDir"] else "",
             f"USER {conf['User'] or '0'}"]
    dockerfile = "\n".join(line for line in lines if line) + "\n"
    try:
        client.images.build(fileobj=io.BytesIO(_tar({"Dockerfile": dockerfile.encode()})),
                            custom_context=True, tag=tag, rm=True, pull=False)
    except (docker.errors.BuildError, docker.errors.APIError) as exc:
        raise ImageBuildError(f"configuring {tag} failed: {exc}") from exc
    built = client.images.get(tag)
    if not _holds(built.attrs.get("Config") or {}, conf):
        raise ImageBuildError(f"the engine did not give {tag} its labels, command and working "
                              "folder, by a commit or a build")


def _merge_env(image: list[str], extra: tuple[str, ...]) -> list[str]:
    names = {item.split("=", 1)[0] for item in extra}
    return [item for item in image if item.split("=", 1)[0] not in names] + list(extra)


def _remove(container: Any) -> None:
    try:
        container.remove(force=True)
    except docker.errors.NotFound:
        pass


def _tar(files: Mapping[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path, data in sorted(files.items()):
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()
