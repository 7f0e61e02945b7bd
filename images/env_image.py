"""Environment images: what the tasks of one repository and version share.

SWE-bench builds an environment image per repository and version (the dependencies) and each
instance on top of it (the checkout and the project's install). repogym does the same for a
task whose environment names ``env_setup`` or ``env_commit``
(:class:`repogym.schema.Environment`):

- ``repogym/env:...``, on the Python base: ``env_setup`` (requirement files, pinned packages).
  Then, with ``env_commit``, the task's own ``setup`` runs in a checkout of the repository at
  that commit (SWE-bench's ``environment_setup_commit``), so what the project's install pulls
  in (its dependencies, its ``[test]`` extras) is shared too. The project itself is then
  uninstalled and the checkout removed: that commit is often later than a task's base and may
  hold its fix, and none of its code stays (:func:`repogym.images.installed.forget` fails the
  build if a trace is left on ``sys.path``). That pre-install is an optimisation: when it
  fails, the image is kept without it and each task's layer installs what is missing.
- ``repogym/repo:...``, one per task, on the environment image: the checkout at the base
  commit and ``setup``, which finds its dependencies installed (see
  :func:`repogym.images.repository.ensure_image`). Its own layer is about the size of the checkout.

The tag digests everything that decides the image, so the tasks of one repository, version and
spec share one environment image, and an unchanged spec is a cache hit. Builds of one tag wait
for each other (threads and processes alike), so workers that need the same environment build
it once.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from repogym import settings
from repogym.errors import ImageBuildError
from repogym.images import installed
from repogym.images import lru as image_lru
from repogym.images.build import BUILD_DIR, Layer, build_layer
from repogym.images.recipe import (
    LABEL_USER,
    PREAMBLE,
    USER,
    WORKDIR,
    BuiltImage,
    build_files,
    digest,
    has_image,
    raise_for_build,
    tar_folder,
)
from repogym.images.start_image import ensure_start, start_tag
from repogym.progress import Progress
from repogym.repo import export_tree
from repogym.sandbox.client import docker_client
from repogym.sandbox.engines import copy_image
from repogym.schema import Environment, Task

ENV_RECIPE = "1"
LABEL_ENV = "org.repogym.env"  # on an environment image: its spec's digest
LABEL_PREINSTALL = "org.repogym.env-preinstall"  # ok, failed or none


def is_shared(env: Environment) -> bool:
    """Whether the task's image is built on a shared environment image."""
    return bool(env.env_setup or env.env_commit) and not env.image


def env_spec(task: Task) -> dict[str, Any]:
    """What decides an environment image (never the base commit: that is the task's layer)."""
    env = task.environment
    return {
        "recipe": ENV_RECIPE,
        "repo": task.repo,
        "python": env.python,
        "base": start_tag(env),
        "env_setup": list(env.env_setup),
        "env_commit": env.env_commit,
        "setup": list(env.setup) if env.env_commit else None,
    }


def env_tag(task: Task) -> str:
    slug = "".join(c if c.isalnum() else "-" for c in task.repo.lower()).strip("-")[:60]
    return f"repogym/env:{slug or 'repo'}-{digest(env_spec(task))}"


@contextlib.contextmanager
def tag_lock(tag: str) -> Iterator[None]:
    """One builder of ``tag`` at a time on this machine (threads and processes alike)."""
    name = hashlib.sha256(tag.encode()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / f"repogym-build-{name}.lock"
    with path.open("a") as handle:  # flock: one lock per open file, so threads too
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_env(task: Task, progress: Progress = print) -> BuiltImage:
    """The task's environment image, built unless an identical one exists."""
    client = docker_client()
    tag = env_tag(task)
    image_lru.record_use(tag)
    with tag_lock(tag):
        if has_image(client, tag) or copy_image(tag, client):
            return BuiltImage(tag, "", True, 0.0)
        start = time.monotonic()
        env = task.environment
        root = ensure_start(env, progress)
        archives: tuple[tuple[str, bytes], ...] = ()
        with tempfile.TemporaryDirectory(prefix="repogym-env-") as tmp:
            if env.env_commit:
                if not task.source:
                    raise ImageBuildError(
                        f"task {task.instance_id} names env_commit {env.env_commit} but has no "
                        f"`source` to take it from, and {tag} does not exist: add the source.")
                tree = Path(tmp) / "testbed"
                export_tree(task.source, env.env_commit, tree)
                archives = (("/", tar_folder(tree, WORKDIR.lstrip("/"))),)
            wanted = installed.pip_requests(env.env_setup, WORKDIR)
            files = {**build_files(),
                     f"{BUILD_DIR}/wanted.json": json.dumps(wanted).encode(),
                     f"{BUILD_DIR}/installed.py": Path(installed.__file__).read_bytes()}
            progress(f"building {tag} ({task.repo} environment"
                     + (f" at {env.env_commit[:12]})" if env.env_commit else ")"))
            run = build_layer(Layer(
                image=root, tag=tag, script=env_script(env), files=files, archives=archives,
                labels={LABEL_ENV: digest(env_spec(task)), LABEL_USER: USER},
                workdir=WORKDIR, timeout=settings.BUILD_TIMEOUT.number(),
                script_labels=(LABEL_PREINSTALL,)), progress)
        if run.exit_code != 0:
            raise_for_build(tag, run.exit_code, run.log)
        return BuiltImage(tag, "", False, time.monotonic() - start)


def env_script(env: Environment) -> str:
    """Installs ``env_setup`` (checked as a task's setup is), then, with ``env_commit``, the
    task's setup in the checkout there, best effort, and forgets the project."""
    shared = " && ".join(f"({cmd})" for cmd in env.env_setup) or "true"
    setup = " && ".join(f"({cmd})" for cmd in env.setup) or "true"
    pre = f"""phase preinstall
set +e  # an optimisation: what it did not install, each task's layer installs
( {setup} )
pre=$?
set -e
if [ "$pre" = 0 ]; then echo "REPOGYM-LABEL {LABEL_PREINSTALL}=ok"
else echo "REPOGYM-LABEL {LABEL_PREINSTALL}=failed (exit $pre)"; fi
phase forget
"$PY" {BUILD_DIR}/installed.py forget {WORKDIR}
cd / && rm -rf {WORKDIR} && mkdir -p {WORKDIR}
""" if env.env_commit else f'echo "REPOGYM-LABEL {LABEL_PREINSTALL}=none"\n'
    return PREAMBLE + f"""
phase user
id -u {USER} >/dev/null 2>&1 || useradd -m -u 1000 {USER}
mkdir -p {WORKDIR} && cd {WORKDIR}
phase setup
set +e  # the commands run as written: a failure inside one is theirs to stop on or not
( {shared} )
status=$?
set -e
[ "$status" = 0 ] || exit "$status"
phase check
PY=$(command -v python || command -v python3)
"$PY" {BUILD_DIR}/installed.py check {BUILD_DIR}/wanted.json
cd {WORKDIR}
{pre}phase finish
chown {USER}:{USER} {WORKDIR}
rm -rf /tmp/repogym-* {BUILD_DIR}
"""
