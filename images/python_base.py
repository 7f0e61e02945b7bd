"""The Python base image: a Python with git and bash, an unprivileged user ``repogym`` and an
isolated virtual environment at /opt/venv (first on PATH) holding pip and a pinned pytest
(:data:`TOOLCHAIN`, per Python version: it decides grades), both from the package index. The
environment sees none of the distribution's Python packages: the root image has none (see
:mod:`.rootfs`), and the venv is not made with ``--system-site-packages``. The root is taken from
``REPOGYM_BASE_IMAGE`` when the engine has it (or can pull it with ``REPOGYM_PULL=1``);
otherwise built here with debootstrap and ``docker import``, which needs no registry at all.

Every other layer starts from it: :mod:`.build_tools`, :mod:`.toolchains`, :mod:`.env_image`
and the task images of :mod:`.repository`.
"""

from __future__ import annotations

import os
import time
from typing import Any

import docker.errors

from repogym import settings
from repogym.errors import ImageBuildError
from repogym.images.build import BUILD_DIR, Layer, build_layer
from repogym.images.recipe import (
    LABEL_USER,
    PREAMBLE,
    USER,
    WORKDIR,
    BuiltImage,
    build_files,
    digest,
    failed_phase,
    has_image,
    log_tail,
)
from repogym.images.rootfs import debootstrap, rootfs_tag
from repogym.progress import Progress
from repogym.sandbox.client import docker_client
from repogym.sandbox.engines import copy_image
from repogym.schema import PYTHON_SUITES
from repogym.tls import explain_certificate

VENV = "/opt/venv"
RECIPE_VERSION = "2"  # the base images
PIP = "pip==26.0.1"
# pytest and everything it imports, installed with --no-deps: exactly these, per Python version
TOOLCHAIN: dict[str, tuple[str, ...]] = {
    "3.9": ("pytest==8.3.5", "pluggy==1.6.0", "iniconfig==2.1.0", "packaging==25.0",
            "exceptiongroup==1.3.0", "tomli==2.2.1", "typing_extensions==4.13.2"),
    "3.11": ("pytest==8.3.5", "pluggy==1.6.0", "iniconfig==2.1.0", "packaging==25.0"),
    "3.13": ("pytest==8.3.5", "pluggy==1.6.0", "iniconfig==2.1.0", "packaging==25.0"),
}
BASE_ENV = (f"PATH={VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            f"VIRTUAL_ENV={VENV}", "LANG=C.UTF-8", "PYTHONDONTWRITEBYTECODE=1",
            "PIP_DISABLE_PIP_VERSION_CHECK=1")


def _root_name(python: str) -> str:
    """The root image's name as configured (REPOGYM_BASE_IMAGE) or built here."""
    configured = settings.BASE_IMAGE.get().format(python=python)
    if configured:
        return configured
    suite = PYTHON_SUITES.get(python)
    if suite is None:
        raise ImageBuildError(
            f"no local recipe for Python {python}: use one of {sorted(PYTHON_SUITES)} or set "
            "REPOGYM_BASE_IMAGE to an image that has it."
        )
    return rootfs_tag(suite)


def base_tag(python: str) -> str:
    """Names what the base is: its root, its script and pins (never the CA bundle)."""
    recipe = digest(RECIPE_VERSION, python, _root_name(python), _base_script(python))
    return f"repogym/base:py{python}-{recipe}"


def ensure_base(python: str = "3.11", progress: Progress = print) -> BuiltImage:
    client = docker_client()
    tag = base_tag(python)
    if has_image(client, tag) or copy_image(tag, client):
        return BuiltImage(tag, "", True, 0.0)
    start = time.monotonic()
    root = _root_image(client, python, progress)
    progress(f"building {tag} from {root}")
    run = build_layer(Layer(image=root, tag=tag, script=_base_script(python),
                            files=build_files(), labels={LABEL_USER: USER}, env=BASE_ENV,
                            workdir=WORKDIR, timeout=settings.BUILD_TIMEOUT.number()), progress)
    if run.exit_code != 0:
        certificate = explain_certificate(run.log)
        raise ImageBuildError(
            f"building {tag} failed (exit {run.exit_code}) at {failed_phase(run.log)!r}"
            f"{'; ' + certificate if certificate else ''}; its output ends:\n{log_tail(run.log)}\n"
            "If the build cannot reach the package index (behind a proxy that intercepts TLS), "
            "set REPOGYM_CA_BUNDLE=/path/to/ca.pem.")
    return BuiltImage(tag, "", False, time.monotonic() - start)


def measure_base(python: str, progress: Progress = print) -> dict[str, Any]:
    """Builds the root and the base of ``python`` from scratch under throwaway tags (nothing
    cached is used or replaced) and reports each step's seconds and the images' sizes."""
    client = docker_client()
    suite = PYTHON_SUITES.get(python)
    if suite is None:
        raise ImageBuildError(f"no local recipe for Python {python}: use one of "
                              f"{sorted(PYTHON_SUITES)}.")
    scratch = f"repogym/measure:{suite}-{os.getpid()}"
    root, base = f"{scratch}-root", f"{scratch}-base"
    try:
        start = time.monotonic()
        debootstrap(suite, root, progress)
        built = time.monotonic()
        run = build_layer(Layer(image=root, tag=base, script=_base_script(python),
                                files=build_files(), labels={LABEL_USER: USER}, env=BASE_ENV,
                                workdir=WORKDIR, timeout=settings.BUILD_TIMEOUT.number()), progress)
        if run.exit_code != 0:
            raise ImageBuildError(f"building the base failed at {failed_phase(run.log)!r}:\n"
                                  f"{log_tail(run.log)}")
        return {"python": python, "root_seconds": round(built - start, 1),
                "base_seconds": round(run.seconds, 1),
                "root_mb": round(client.images.get(root).attrs["Size"] / 1e6),
                "base_mb": round(client.images.get(base).attrs["Size"] / 1e6)}
    finally:
        for tag in (base, root):
            try:
                client.images.remove(tag)
            except docker.errors.NotFound:  # Podman's "image not known" is no ImageNotFound
                pass


def _root_image(client: Any, python: str, progress: Progress) -> str:
    configured = settings.BASE_IMAGE.get().format(python=python)
    if configured:
        if has_image(client, configured):
            return configured
        if settings.PULL.is_on():
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
    tag = rootfs_tag(suite)
    if not has_image(client, tag):
        debootstrap(suite, tag, progress)
    return tag


def _base_script(python: str) -> str:
    pins = TOOLCHAIN.get(python)
    if pins is None:
        raise ImageBuildError(f"no pinned pytest for Python {python}: use one of "
                              f"{sorted(TOOLCHAIN)}, or give the task an environment.image.")
    ensurepip = "import ensurepip, os; print(os.path.dirname(ensurepip.__file__))"
    return PREAMBLE + f"""
phase user
id -u {USER} >/dev/null 2>&1 || useradd --create-home --uid 1000 --shell /bin/bash {USER}
phase venv
PY=$(command -v python3 || command -v python)
bundled="$("$PY" -c '{ensurepip}' 2>/dev/null || true)/_bundled"
# an isolated venv: the interpreter's own site packages (Debian's dist-packages) stay out
"$PY" -m venv --without-pip {VENV}
# pip is started from the wheel venv would use, then replaced by the pinned one
wheel=$(ls /usr/share/python-wheels/pip-*.whl "$bundled"/pip-*.whl 2>/dev/null | head -n 1)
if [ -z "$wheel" ]; then
  echo "no pip wheel to start from: the root image needs python3-venv (or ensurepip)" >&2
  exit 1
fi
phase pip
{VENV}/bin/python "$wheel/pip" install -q --no-warn-script-location {PIP}
phase pytest
{VENV}/bin/python -m pip install -q --no-deps {" ".join(pins)}
{VENV}/bin/python -m pip check
{VENV}/bin/pytest --version
phase finish
# the wheels that venvs start pip from hold pip's vendored libraries: gone with their use
rm -rf /usr/share/python-wheels "$bundled"
mkdir -p {WORKDIR} && chown {USER}:{USER} {WORKDIR}
rm -rf {BUILD_DIR}
"""
