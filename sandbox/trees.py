"""Images exported as root file systems, for the daemonless sandbox (bubblewrap).

An image's tree is its files as ``docker export`` gives them, unpacked under
``REPOGYM_ROOTFS_DIR`` (default ``~/.cache/repogym/rootfs``) in a folder named after its tag,
with the image's configuration beside it (``NAME.json``: its environment, working folder and
labels). A tree is made once, from the process's engine (Docker or Podman) or one of
``REPOGYM_IMAGE_SOURCES``, and never changes: sandboxes mount it read-only. On a machine where
no engine may run, the folder is copied from one where one does (``repogym images export``).

A tree is readable to everyone and writable by its owner alone: made as root, that is root,
and the sandboxes' user (``REPOGYM_SANDBOX_USER``) cannot change it even from outside a
sandbox; made by a user, it is that user's. Inside a sandbox it is a read-only mount either
way, its files seen as owned by nobody (or by the sandbox's own id).
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker.errors

from repogym import settings
from repogym.errors import DockerUnavailable, SandboxError
from repogym.sandbox.client import docker_client, engine_errors
from repogym.sandbox.engines import image_sources, make_client

CONFIG_SUFFIX = ".json"


@dataclass(frozen=True)
class Tree:
    """One exported image: where its files are and what its configuration says."""

    tag: str
    root: Path
    env: tuple[tuple[str, str], ...]
    workdir: str
    labels: dict[str, str]
    image_id: str = ""  # the image's id on the engine it was exported from

    @property
    def user(self) -> str | None:
        return self.labels.get("org.repogym.user") or None


def sandbox_user() -> pwd.struct_passwd | None:
    """The user the trees belong to and the sandboxes run as: this process's own (None), or,
    as root, ``REPOGYM_SANDBOX_USER``."""
    if os.geteuid() != 0:
        return None
    name = settings.SANDBOX_USER.get()
    try:
        return pwd.getpwnam(name)
    except KeyError:
        raise SandboxError(
            f"REPOGYM_SANDBOX_USER={name!r} does not exist: the daemonless sandbox runs as an "
            "unprivileged user when repogym runs as root (`make podman` makes one), or run "
            "repogym as that user") from None


ROOT_STORE = Path("/var/lib/repogym/rootfs")


def store() -> Path:
    """``REPOGYM_ROOTFS_DIR``; else, as root, :data:`ROOT_STORE` (root's, where the
    sandboxes' user reads and cannot write), else ``~/.cache/repogym/rootfs``."""
    configured = settings.ROOTFS_DIR.get()
    if configured:
        return Path(configured)
    if os.geteuid() == 0:
        return ROOT_STORE
    return Path.home() / ".cache" / "repogym" / "rootfs"


def tree_name(tag: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", tag.removeprefix("localhost/"))


def find_tree(tag: str) -> Tree | None:
    """The exported tree of ``tag``, or None when it was never exported here."""
    root = store() / tree_name(tag)
    config = root.with_name(root.name + CONFIG_SUFFIX)
    if not config.is_file() or not root.is_dir():
        return None
    data = json.loads(config.read_text())
    env = tuple((k, v) for k, _, v in (item.partition("=") for item in data.get("env", [])))
    return Tree(tag, root, env, data.get("workdir") or "/", dict(data.get("labels") or {}),
                str(data.get("id") or ""))


def export_tree(tag: str) -> Tree:
    """``tag``'s tree, exported now unless it was before; raises :class:`SandboxError` naming
    the fix when no engine has the image."""
    found = find_tree(tag)
    if found is not None:
        return found
    client = _client_with(tag)
    root = store() / tree_name(tag)
    root.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{root.name}-", dir=root.parent))
    try:
        with engine_errors(f"export {tag}"):
            attrs = client.images.get(tag).attrs
            container = client.api.create_container(tag, command=["true"], network_disabled=True)
            try:
                _unpack(client.api.export(container["Id"]), staging)
            finally:
                client.api.remove_container(container["Id"], force=True)
        # readable to all, writable to none but its owner: as root that is root, and a
        # sandbox that broke out as the sandboxes' user could still not change a tree; no
        # set-id bits (they mean nothing under no_new_privs, and nothing here needs them)
        subprocess.run(["chmod", "-R", "a+rX,u+w,go-w,ug-s", str(staging)], check=True)
        staging.chmod(0o755)
        config = attrs.get("Config") or {}
        root.with_name(root.name + CONFIG_SUFFIX).write_text(json.dumps({
            "tag": tag, "id": attrs.get("Id"), "env": config.get("Env") or [],
            "workdir": config.get("WorkingDir") or "/", "labels": config.get("Labels") or {}},
            indent=1))
        staging.rename(root)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    found = find_tree(tag)
    assert found is not None
    return found


def _client_with(tag: str) -> Any:
    """A client of an engine that has ``tag``: the process's own, else an image source."""
    tried = []
    try:
        candidates = [docker_client()]
    except DockerUnavailable as exc:
        candidates, tried = [], [str(exc.detail)]
    for engine in image_sources():
        try:
            candidates.append(make_client(engine, timeout=600))
        except DockerUnavailable as exc:
            tried.append(exc.detail)
    for client in candidates:
        try:
            client.images.get(tag)
            return client
        except docker.errors.NotFound:
            continue
    raise SandboxError(
        f"no exported tree of {tag} in {store()} and no engine here has the image"
        + (f" ({'; '.join(tried)})" if tried else "")
        + ": build and export it where an engine runs (`repogym images build --suite S` then "
        "`repogym images export --suite S`) and copy that folder here, or set "
        "REPOGYM_ROOTFS_DIR to where the trees are.")


def _unpack(chunks: Any, dest: Path) -> None:
    """Unpacks an export stream (a tar) into ``dest`` with tar itself: links, modes and hard
    links kept, owners not (the tree belongs to whoever runs the sandboxes), devices left out
    (the sandbox mounts its own /dev)."""
    tar = subprocess.Popen(["tar", "-x", "--no-same-owner", "--exclude=./dev/*",
                            "--exclude=dev/*", "-C", str(dest)],
                           stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    assert tar.stdin is not None and tar.stderr is not None
    try:
        for chunk in chunks:
            tar.stdin.write(chunk)
    finally:
        tar.stdin.close()
        err = tar.stderr.read().decode(errors="replace")
        tar.wait()
    if tar.returncode != 0:
        raise SandboxError(f"unpacking the image into {dest} failed: {err[-500:]}")
