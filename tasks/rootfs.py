"""The root image under every base: a Debian with a Python interpreter and nothing else of
Python, made with debootstrap and ``docker import`` (no registry needed).

Only the interpreter, its standard library (Debian splits ``distutils`` and ``lib2to3`` out
of it up to 3.11), the ``venv`` module's pip wheel, git, CA certificates and procps: none of
Debian's Python libraries, so nothing in ``dist-packages`` can shadow or leak into what an
environment installs from the package index.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from repogym import settings
from repogym.errors import ImageBuildError
from repogym.progress import Progress

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
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        imp = subprocess.run(
            ["docker", "import", "-", tag], stdin=tar.stdout, capture_output=True, text=True
        )
        tar.wait()
        if imp.returncode != 0:
            raise ImageBuildError(f"docker import failed: {imp.stderr}")
