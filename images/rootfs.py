"""The root image under every base: a Debian with a Python interpreter and nothing else of
Python, made with debootstrap and imported through the engine's API (Docker's or Podman's;
no registry needed).

Only the interpreter, its standard library (Debian splits ``distutils`` and ``lib2to3`` out
of it up to 3.11), the ``venv`` module's pip wheel, git, CA certificates and procps: none of
Debian's Python libraries, so nothing in ``dist-packages`` can shadow or leak into what an
environment installs from the package index.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from repogym import settings
from repogym.errors import ImageBuildError
from repogym.progress import Progress
from repogym.sandbox.client import docker_client, engine_errors

ROOTFS_RECIPE = "2"
COMMON_PACKAGES = ("python3", "python3-venv", "git", "ca-certificates", "procps")
# Debian ships these parts of the standard library as packages of their own until 3.12
STDLIB_SPLITS = {"bullseye": ("python3-distutils", "python3-lib2to3"),
                 "bookworm": ("python3-distutils", "python3-lib2to3")}
JUNK = ("usr/share/doc", "usr/share/man", "usr/share/info", "var/cache/apt",
        "var/lib/apt/lists", "usr/share/locale")


def packages(suite: str) -> tuple[str, ...]:
    return COMMON_PACKAGES + STDLIB_SPLITS.get(suite, ())


def rootfs_tag(suite: str) -> str:
    digest = hashlib.sha256(f"{ROOTFS_RECIPE}\0{','.join(packages(suite))}".encode())
    return f"repogym/rootfs:{suite}-{digest.hexdigest()[:12]}"


def debootstrap(suite: str, tag: str, progress: Progress = print) -> None:
    """Builds the root file system of ``suite`` and imports it as ``tag``."""
    if shutil.which("debootstrap") is None or os.geteuid() != 0:
        raise ImageBuildError(
            "building a base image needs debootstrap as root (`apt-get install -y debootstrap`), "
            "or set REPOGYM_BASE_IMAGE to an image the engine has."
        )
    progress(f"debootstrap {suite} (a minute or two)")
    with tempfile.TemporaryDirectory(prefix="repogym-rootfs-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        cmd = ["debootstrap", "--variant=minbase", f"--include={','.join(packages(suite))}",
               suite, str(rootfs)]
        mirror = settings.DEBIAN_MIRROR.get()
        if mirror:
            cmd.append(mirror)
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise ImageBuildError(f"debootstrap {suite} failed: {proc.stdout[-1500:]}{proc.stderr}")
        for junk in JUNK:
            shutil.rmtree(rootfs / junk, ignore_errors=True)
        import_tree(rootfs, tag)


def import_tree(root: Path, tag: str) -> str:
    """Imports the folder ``root`` as the image ``tag`` on the process's engine; its id.

    Tagged after the import: Podman's compatible import leaves the image unnamed."""
    client = docker_client()
    tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
    assert tar.stdout is not None
    try:
        with engine_errors(f"import {tag}"):
            answer = client.api.import_image_from_stream(tar.stdout)
    finally:
        tar.stdout.close()
        tar.wait()
    lines = [json.loads(line) for line in str(answer).splitlines() if line.strip()]
    image = str((lines[-1].get("id") or lines[-1].get("status")) if lines else "")
    if tar.returncode != 0 or not image.startswith("sha256:"):
        raise ImageBuildError(f"importing {root} as {tag} failed: {str(answer)[-500:]}")
    repository, _, name = tag.rpartition(":")
    with engine_errors(f"tag {tag}"):
        client.api.tag(image, repository, name)
    return image
