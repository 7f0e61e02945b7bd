"""Task images: the repository at the task's base commit, on the image its environment starts
from (:mod:`.start_image`), a shared environment image (:mod:`.env_image`), or a dataset's own
image that holds the repository (:mod:`.dataset`).

The repository at its base commit is one commit at /testbed (no history, refs, reflog or
remotes), then the task's ``setup`` commands, with network at build time only. What the setup's
pip commands asked for is then checked (:mod:`.installed`): a setup that exits 0 but installed
nothing fails the build. Then pip, setuptools and wheel leave the environment unless asked for
or needed (their vendored copies of other projects would otherwise be readable by the agent).
One image per (repository, commit, environment); an unchanged spec is a cache hit. The CA
bundle is trusted while a layer builds and is no part of it (:mod:`.recipe`).
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

import docker.errors

from repogym import settings
from repogym.errors import ImageBuildError
from repogym.images import derived, install_links, installed
from repogym.images import lru as image_lru
from repogym.images.build import BUILD_DIR, Layer, build_layer
from repogym.images.dataset import ensure_layered
from repogym.images.env_image import ensure_env, env_tag, is_shared
from repogym.images.recipe import (
    LABEL_COMMIT,
    LABEL_SPEC,
    LABEL_USER,
    PREAMBLE,
    PRISTINE,
    USER,
    WORKDIR,
    BuiltImage,
    build_files,
    digest,
    raise_for_build,
    settle_script,
    tar_folder,
)
from repogym.images.start_image import ensure_start, start_tag
from repogym.progress import Progress
from repogym.repo import export_tree, snapshot
from repogym.sandbox.client import docker_client
from repogym.sandbox.engines import copy_image
from repogym.schema import Environment, Task

REPO_RECIPE = "7"  # repository images (4: what setup writes is committed, ``settle_script``;
#                    5: the repository is importable by plain `pytest`, ``_IMPORTABLE``;
#                    6: the install's copies of repository files are links, ``install_links``;
#                    7: build tools the repository imports stay, ``installed.imported_tools``)
LANG_RECIPE = "2"  # other languages' repository layer


def image_spec(task: Task) -> dict[str, Any]:
    """What decides a repository image: repository, commit, environment, and the base it
    starts from (never the CA bundle: the same suite is the same images with or without)."""
    env = task.environment
    return {
        "recipe": REPO_RECIPE,
        "repo": task.repo,
        "commit": task.base_commit,  # names the content: the source's path does not matter
        "python": env.python,
        "image": env.image,
        "base": None if env.image else start_tag(env),
        **({"env": env_tag(task)} if is_shared(env) else {}),
        **({"language": env.language, "lang_recipe": LANG_RECIPE}
           if env.language != "python" else {}),
        "setup": list(env.setup),
    }


def image_tag(task: Task) -> str:
    """The name of the task's image: a thin image for a task made on a snapshot
    (:mod:`.derived`), else the one ``built_tag`` names."""
    if derived.derivable(task):
        return derived.tag(task, built_tag(derived.snapshot_task(task)))
    return built_tag(task)


def built_tag(task: Task) -> str:
    """The name of the task's image built from scratch."""
    slug = "".join(c if c.isalnum() else "-" for c in task.repo.lower()).strip("-")[:60] or "repo"
    return f"repogym/repo:{slug}-{digest(image_spec(task))}"


def ensure_image(task: Task, progress: Progress = print) -> BuiltImage:
    """The task's image, built (with its base) unless an identical one exists; its use is
    recorded (``repogym images prune --budget`` removes the least recently used first, and
    the next call here builds a removed one again)."""
    built = _ensure_image(task, progress)
    image_lru.record_use(built.tag)
    return built


def _commit_of(client: Any, tag: str) -> str:
    """The repository's commit in image ``tag`` (its label), or "" when there is no such image.
    An image of the tag without the label is not one this version built (Podman's API once
    dropped a commit's labels): it is removed, to be copied or built again, since an agent's
    diff is taken against that commit."""
    try:
        image = client.images.get(tag)
    except docker.errors.ImageNotFound:
        return ""
    commit = (image.labels or {}).get(LABEL_COMMIT, "")
    if not commit:
        client.images.remove(tag, force=True)
    return str(commit)


def _ensure_image(task: Task, progress: Progress) -> BuiltImage:
    layered = ensure_layered(task, progress)
    if layered is not None:
        return layered
    client = docker_client()
    tag = image_tag(task)
    commit = _commit_of(client, tag)
    if commit:
        return BuiltImage(tag, commit, True, 0.0)
    # the tag names the content: another engine's copy of it is the image a build would make
    if copy_image(tag, client):
        commit = _commit_of(client, tag)
        if commit:
            return BuiltImage(tag, commit, True, 0.0)
    if not task.source:
        raise ImageBuildError(
            f"task {task.instance_id} has no `source` and image {tag} does not exist: add a "
            "source path to the task or build the image elsewhere."
        )
    if tag != built_tag(task):
        return _derive(client, task, tag, progress)
    return _build(task, tag, progress)


def _derive(client: Any, task: Task, tag: str, progress: Progress) -> BuiltImage:
    """The thin image of a task made on a snapshot, on the snapshot's image; where an install
    copied a changed file, the image built from scratch under that name too."""
    start = time.monotonic()
    snapshot = ensure_image(derived.snapshot_task(task), progress)
    run = derived.derive(task, snapshot.tag, progress)
    if run.exit_code == 0:
        return BuiltImage(tag, run.labels[LABEL_COMMIT], False, time.monotonic() - start)
    if run.exit_code != derived.COPY_FOUND:
        raise_for_build(tag, run.exit_code, run.log)
    full = ensure_image(task.with_(extra={**task.extra, "original_commit": ""}), progress)
    repository, name = tag.rsplit(":", 1)
    client.images.get(full.tag).tag(repository, name)
    return BuiltImage(tag, full.repo_commit, False, time.monotonic() - start)


def _build(task: Task, tag: str, progress: Progress) -> BuiltImage:
    start = time.monotonic()
    assert task.source, "checked by the caller"
    env = task.environment
    root = (ensure_env(task, progress).tag if is_shared(env)
            else env.image or ensure_start(env, progress))
    with tempfile.TemporaryDirectory(prefix="repogym-ctx-") as tmp:
        tree = Path(tmp) / "testbed"
        export_tree(task.source, task.base_commit, tree)
        commit = snapshot(tree)
        progress(f"building {tag} ({task.repo} at {task.base_commit[:12]})")
        wanted = installed.pip_requests(env.setup, WORKDIR)
        # what the environment image's setup asked for by name stays (the build tools too)
        wanted["names"] = sorted({*wanted["names"],
                                  *installed.pip_requests(env.env_setup, WORKDIR)["names"]})
        files = {**build_files(), f"{BUILD_DIR}/wanted.json": json.dumps(wanted).encode(),
                 f"{BUILD_DIR}/installed.py": Path(installed.__file__).read_bytes(),
                 f"{BUILD_DIR}/install_links.py": Path(install_links.__file__).read_bytes()}
        labels = {LABEL_COMMIT: commit, LABEL_SPEC: digest(image_spec(task)), LABEL_USER: USER}
        run = build_layer(Layer(
            image=root, tag=tag, script=_repo_script(task.environment), files=files,
            archives=(("/", tar_folder(tree, WORKDIR.lstrip("/"))),), labels=labels,
            workdir=WORKDIR, timeout=settings.BUILD_TIMEOUT.number(),
            script_labels=(LABEL_COMMIT,)), progress)
    if run.exit_code != 0:
        raise_for_build(tag, run.exit_code, run.log)
    return BuiltImage(tag, run.labels.get(LABEL_COMMIT, commit), False, time.monotonic() - start)


# Plain `pytest` imports the repository as `python -m pytest` does, as in SWE-bench's images
# (where setup installs it): /testbed, and its src/ folder when there is one, go at the end of
# sys.path, so an installed copy still comes first and only what no one installed is added.
_IMPORTABLE = (
    "site=$(\"$PY\" -I -c 'import sysconfig; print(sysconfig.get_path(\"purelib\"))') && "
    f"mkdir -p \"$site\" && {{ echo {WORKDIR}; if [ -d {WORKDIR}/src ]; then "
    f"echo {WORKDIR}/src; fi; }} > \"$site/repogym-testbed.pth\"")


def _repo_script(env: Environment) -> str:
    setup = " && ".join(f"({cmd})" for cmd in env.setup) or "true"
    # in repogym's own environment the build tools leave (see the module docstring); an image
    # of the task's own is left as it is
    prune = "" if env.image else f'"$PY" {BUILD_DIR}/installed.py prune {BUILD_DIR}/wanted.json'
    return PREAMBLE + f"""
phase user
id -u {USER} >/dev/null 2>&1 || useradd -m -u 1000 {USER}
git config --system --add safe.directory {WORKDIR}
cd {WORKDIR}
phase setup
set +e  # the commands run as written: a failure inside one is theirs to stop on or not
( {setup} )
status=$?
set -e
[ "$status" = 0 ] || exit "$status"
phase check
PY=$(command -v python || command -v python3 || true)
if [ -n "$PY" ] && "$PY" -c 'import importlib.metadata' 2>/dev/null; then
  "$PY" {BUILD_DIR}/installed.py check {BUILD_DIR}/wanted.json
  {prune}
  {_IMPORTABLE}
  "$PY" {BUILD_DIR}/install_links.py {WORKDIR}
else
  echo "repogym: no Python 3.8+ on PATH: what setup installed is not checked"
fi
phase finish
{settle_script(WORKDIR)}
git -C {WORKDIR} reflog expire --expire=now --all && git -C {WORKDIR} gc -q --prune=now
test "$(git -C {WORKDIR} rev-list --all | wc -l)" = 1
chown -R {USER}:{USER} {WORKDIR}
mkdir -p {PRISTINE} && {pristine_copy(WORKDIR, PRISTINE + "/testbed")}
cp -a /home/{USER} {PRISTINE}/home && chmod 700 {PRISTINE}
rm -rf {BUILD_DIR}
"""


def pristine_copy(source: str, dest: str) -> str:
    """The pristine copy as hard links: the same files, not a second copy on disk. A layer
    stores linked files once; a container that changes one of them gets its own copy of that
    file (overlayfs copies it up), and the other name keeps the image's content."""
    return f"cp -al {source} {dest}"
