"""Layered images with a content-hash cache.

``base``: a Python with git, bash and pytest, an unprivileged user ``repogym`` and a virtual
environment at /opt/venv (first on PATH). Taken from ``REPOGYM_BASE_IMAGE`` when the engine has
it (or can pull it with ``REPOGYM_PULL=1``); otherwise built here with debootstrap and
``docker import``, which needs no registry at all.

``repo``: the repository at its base commit as one commit at /testbed (no history, refs, reflog
or remotes), then the task's ``setup`` commands, with network at build time only. One image per
(repository, commit, environment); an unchanged spec is a cache hit.

``REPOGYM_CA_BUNDLE=/path/ca.pem`` is trusted by every build step (proxies that intercept TLS).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker.errors

from repogym.envs.sandbox.client import docker_client
from repogym.errors import ImageBuildError, SetupFailed
from repogym.tasks.repo import export_tree, snapshot
from repogym.tasks.schema import PYTHON_SUITES, Environment, Task

WORKDIR = "/testbed"
USER = "repogym"
LABEL_SPEC = "org.repogym.spec"
LABEL_COMMIT = "org.repogym.repo-commit"
LABEL_USER = "org.repogym.user"
RECIPE_VERSION = "1"  # the base and root images
REPO_RECIPE = "2"  # repository images
PRISTINE = "/opt/repogym-pristine"
DEBOOTSTRAP_PACKAGES = (
    "python3,python3-venv,python3-pip,python3-pytest,python3-setuptools,python3-wheel,"
    "git,ca-certificates,procps"
)
Progress = Callable[[str], None]


@dataclass(frozen=True)
class BuiltImage:
    tag: str
    repo_commit: str
    cached: bool
    seconds: float


def ca_bundle() -> bytes:
    path = os.environ.get("REPOGYM_CA_BUNDLE")
    if not path:
        return b""
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ImageBuildError(
            f"REPOGYM_CA_BUNDLE={path} cannot be read ({exc}): point it at a PEM file or unset it."
        ) from exc


def _digest(*parts: object) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part if isinstance(part, bytes) else json.dumps(part, sort_keys=True).encode())
        h.update(b"\0")
    return h.hexdigest()[:12]


def _has_image(client: Any, tag: str) -> bool:
    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


# --- base ------------------------------------------------------------------------------------


def base_tag(python: str) -> str:
    return f"repogym/base:py{python}-{_digest(RECIPE_VERSION, python, ca_bundle())}"


def ensure_base(python: str = "3.11", progress: Progress = print) -> BuiltImage:
    client = docker_client()
    tag = base_tag(python)
    if _has_image(client, tag):
        return BuiltImage(tag, "", True, 0.0)
    start = time.monotonic()
    root = _root_image(client, python, progress)
    progress(f"building {tag} from {root}")
    _build(client, tag, _base_dockerfile(root), {"ca.pem": ca_bundle()}, progress)
    return BuiltImage(tag, "", False, time.monotonic() - start)


def _root_image(client: Any, python: str, progress: Progress) -> str:
    configured = os.environ.get("REPOGYM_BASE_IMAGE", "").format(python=python)
    if configured:
        if _has_image(client, configured):
            return configured
        if os.environ.get("REPOGYM_PULL") == "1":
            try:
                client.images.pull(configured)
                return configured
            except docker.errors.DockerException as exc:
                progress(f"cannot pull {configured} ({exc}); building a base locally")
    suite = PYTHON_SUITES.get(python)
    if suite is None:
        raise ImageBuildError(
            f"no local recipe for Python {python}: use one of {sorted(PYTHON_SUITES)} or set "
            "REPOGYM_BASE_IMAGE to an image that has it."
        )
    tag = f"repogym/rootfs:{suite}-{_digest(RECIPE_VERSION, DEBOOTSTRAP_PACKAGES)}"
    if not _has_image(client, tag):
        _debootstrap(suite, tag, progress)
    return tag


def _debootstrap(suite: str, tag: str, progress: Progress) -> None:
    if shutil.which("debootstrap") is None or os.geteuid() != 0:
        raise ImageBuildError(
            "building a base image needs debootstrap as root (`apt-get install -y debootstrap`), "
            "or set REPOGYM_BASE_IMAGE to an image the engine has."
        )
    progress(f"debootstrap {suite} (about a minute)")
    with tempfile.TemporaryDirectory(prefix="repogym-rootfs-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        cmd = [
            "debootstrap",
            "--variant=minbase",
            f"--include={DEBOOTSTRAP_PACKAGES}",
            suite,
            str(rootfs),
        ]
        mirror = os.environ.get("REPOGYM_DEBIAN_MIRROR")
        if mirror:
            cmd.append(mirror)
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise ImageBuildError(f"debootstrap {suite} failed: {proc.stdout[-1500:]}{proc.stderr}")
        for junk in (
            "usr/share/doc",
            "usr/share/man",
            "usr/share/info",
            "var/cache/apt",
            "var/lib/apt/lists",
            "usr/share/locale",
        ):
            shutil.rmtree(rootfs / junk, ignore_errors=True)
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        imp = subprocess.run(
            ["docker", "import", "-", tag], stdin=tar.stdout, capture_output=True, text=True
        )
        tar.wait()
        if imp.returncode != 0:
            raise ImageBuildError(f"docker import failed: {imp.stderr}")


def _base_dockerfile(root: str) -> str:
    return f"""FROM {root}
COPY ca.pem /tmp/ca.pem
RUN if [ -s /tmp/ca.pem ]; then \\
      cp /tmp/ca.pem /usr/local/share/ca-certificates/repogym-extra.crt && \\
      (update-ca-certificates >/dev/null 2>&1 \\
       || cat /tmp/ca.pem >> /etc/ssl/certs/ca-certificates.crt); \\
    fi; rm -f /tmp/ca.pem
RUN (id -u {USER} >/dev/null 2>&1 || useradd --create-home --uid 1000 --shell /bin/bash {USER}) \\
 && (command -v pytest >/dev/null || python3 -m pip install -q pytest) \\
 && python3 -m venv --system-site-packages /opt/venv \\
 && mkdir -p {WORKDIR} && chown {USER}:{USER} {WORKDIR}
ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\
    LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \\
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \\
    REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
LABEL {LABEL_USER}="{USER}"
WORKDIR {WORKDIR}
"""


# --- repository images -----------------------------------------------------------------------


def image_spec(task: Task) -> dict[str, Any]:
    """What decides a repository image: repository, commit, environment."""
    env = task.environment
    return {
        "recipe": REPO_RECIPE,
        "repo": task.repo,
        "commit": task.base_commit,  # names the content: the source's path does not matter
        "python": env.python,
        "image": env.image,
        "setup": list(env.setup),
        "ca": _digest(ca_bundle()),
    }


def image_tag(task: Task) -> str:
    slug = "".join(c if c.isalnum() else "-" for c in task.repo.lower()).strip("-")[:60] or "repo"
    return f"repogym/repo:{slug}-{_digest(image_spec(task))}"


def ensure_image(task: Task, progress: Progress = print) -> BuiltImage:
    """The task's image, built (with its base) unless an identical one exists."""
    from repogym.tasks.layer import ensure_layered  # a dataset's image that holds the repo

    layered = ensure_layered(task, progress)
    if layered is not None:
        return layered
    client = docker_client()
    tag = image_tag(task)
    try:
        image = client.images.get(tag)
        return BuiltImage(tag, image.labels.get(LABEL_COMMIT, ""), True, 0.0)
    except docker.errors.ImageNotFound:
        pass
    if not task.source:
        raise ImageBuildError(
            f"task {task.instance_id} has no `source` and image {tag} does not exist: add a "
            "source path to the task or build the image elsewhere."
        )
    start = time.monotonic()
    root = task.environment.image or ensure_base(task.environment.python, progress).tag
    with tempfile.TemporaryDirectory(prefix="repogym-ctx-") as tmp:
        tree = Path(tmp) / "testbed"
        export_tree(task.source, task.base_commit, tree)
        commit = snapshot(tree)
        progress(f"building {tag} ({task.repo} at {task.base_commit[:12]})")
        files = {"testbed.tar": _tar_folder(tree), "ca.pem": ca_bundle()}
        _build(
            client,
            tag,
            _repo_dockerfile(root, task.environment, commit, image_spec(task)),
            files,
            progress,
        )
    return BuiltImage(tag, commit, False, time.monotonic() - start)


def _repo_dockerfile(root: str, env: Environment, commit: str, spec: dict[str, Any]) -> str:
    setup = " && ".join(f"({cmd})" for cmd in env.setup) or "true"
    return f"""FROM {root}
USER root
COPY ca.pem /tmp/ca.pem
RUN if [ -s /tmp/ca.pem ]; then cat /tmp/ca.pem >> /etc/ssl/certs/ca-certificates.crt; fi; \\
    rm -f /tmp/ca.pem; (id -u {USER} >/dev/null 2>&1 || useradd -m -u 1000 {USER}); \\
    mkdir -p {WORKDIR}
ADD testbed.tar {WORKDIR}
WORKDIR {WORKDIR}
RUN git config --system --add safe.directory {WORKDIR} && {setup}
RUN git config --system --add safe.directory {WORKDIR} \\
 && git -C {WORKDIR} reflog expire --expire=now --all && git -C {WORKDIR} gc -q --prune=now \\
 && test "$(git -C {WORKDIR} rev-list --all | wc -l)" = 1 \\
 && chown -R {USER}:{USER} {WORKDIR} \\
 && mkdir -p {PRISTINE} && cp -a {WORKDIR} {PRISTINE}/testbed \\
 && cp -a /home/{USER} {PRISTINE}/home && chmod 700 {PRISTINE}
LABEL {LABEL_COMMIT}="{commit}" {LABEL_SPEC}="{_digest(spec)}" {LABEL_USER}="{USER}"
"""


def _tar_folder(folder: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for child in sorted(folder.iterdir()):
            tar.add(str(child), arcname=child.name)
    return buf.getvalue()


def _build(
    client: Any, tag: str, dockerfile: str, files: dict[str, bytes], progress: Progress
) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in {"Dockerfile": dockerfile.encode(), **files}.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    buf.seek(0)
    log: list[str] = []
    try:
        for chunk in client.api.build(
            fileobj=buf,
            custom_context=True,
            tag=tag,
            rm=True,
            forcerm=True,
            decode=True,
            network_mode="bridge",
        ):
            if "error" in chunk:
                error = SetupFailed if "returned a non-zero code" in chunk["error"] else (
                    ImageBuildError)
                raise error(
                    f"building {tag} failed: {chunk['error'].strip()}\n" + "".join(log[-30:])
                )
            if "stream" in chunk:
                log.append(chunk["stream"])
    except docker.errors.APIError as exc:
        raise ImageBuildError(f"building {tag} failed: {exc}") from exc


def image_info(tag: str) -> dict[str, Any]:
    """Digest, size and labels of a built image (for records and `repogym doctor`)."""
    image = docker_client().images.get(tag)
    return {"tag": tag, "id": image.id, "size": image.attrs.get("Size", 0), "labels": image.labels}
