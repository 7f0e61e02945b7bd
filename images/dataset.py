"""A dataset's own image, with what repogym needs laid on top.

Datasets name images that already hold the repository at ``/testbed`` and its environment:
swebench's ``sweb.eval.x86_64.<id>``, SWE-smith's ``image_name``, R2E-Gym's ``docker_image``.
When a task's ``environment.image`` is such an image and it holds the task's base commit (the
head, or an ancestor of it: swebench commits its setup on top), :func:`ensure_layered` builds
``repogym/layer:...`` from it instead of copying the repository in again:

- the unprivileged user the agent and the tests run as;
- ``/testbed`` re-made as one commit (the files git tracked, as they are in the image, and
  what the dataset's install left there that git does not ignore: see
  :func:`repogym.images.recipe.settle_script`) with no other refs, no reflog, no remotes;
- the image's Python environment first on PATH (swebench's conda ``testbed`` environment);
- the pristine copy grading starts from, and the labels the sandbox reads.

Anything else is left as the dataset built it, so its tests run as its harness runs them.
"""

from __future__ import annotations

import shlex
import time
from typing import Any

import docker.errors

from repogym.errors import ImageBuildError
from repogym.images.recipe import (
    LABEL_COMMIT,
    LABEL_USER,
    PRISTINE,
    USER,
    WORKDIR,
    BuiltImage,
    build_dockerfile,
    digest,
)
from repogym.progress import Progress
from repogym.repo import SNAPSHOT_ENV
from repogym.sandbox.client import docker_client
from repogym.sandbox.util import DIFF_EXCLUDES
from repogym.schema import Task

LAYER_RECIPE = "2"  # 2: what the install left is in the base commit
CONDA_ENVS = ("/opt/miniconda3/envs/testbed", "/opt/conda/envs/testbed")
SEARCH_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def available(name: str, pull: bool = False) -> bool:
    """Whether the engine has ``name``, pulling it first when ``pull`` (False when no
    registry answers)."""
    client = docker_client()
    try:
        client.images.get(name)
        return True
    except docker.errors.ImageNotFound:
        pass
    except docker.errors.DockerException:
        return False
    if not pull:
        return False
    try:
        client.images.pull(name)
        return True
    except docker.errors.DockerException:
        return False


def layered_tag(image_id: str, task: Task) -> str:
    slug = "".join(c if c.isalnum() else "-" for c in task.repo.lower()).strip("-")[:60]
    return f"repogym/layer:{slug or 'repo'}-{digest(LAYER_RECIPE, image_id, task.base_commit)}"


def ensure_layered(task: Task, progress: Progress = print) -> BuiltImage | None:
    """The layered image of ``task``, or None when its ``environment.image`` does not hold the
    repository at the base commit (the image is then a plain starting point)."""
    name = task.environment.image
    if not name:
        return None
    client = docker_client()
    try:
        base = client.images.get(name)
    except docker.errors.ImageNotFound:
        return None
    tag = layered_tag(base.id, task)
    try:
        built = client.images.get(tag)
        return BuiltImage(tag, built.labels.get(LABEL_COMMIT, ""), True, 0.0)
    except docker.errors.ImageNotFound:
        pass
    probe = probe_image(client, name, task.base_commit)
    if not probe["holds"]:
        return None
    start = time.monotonic()
    progress(f"building {tag} on {name} ({task.repo} at {task.base_commit[:12]})")
    stage = f"{tag}-unlabelled"
    build_dockerfile(client, stage, layer_dockerfile(name, probe), {}, progress)
    try:  # the snapshot's commit id depends on the image's files: read it, then label it
        out = client.containers.run(stage, ["git", "-C", WORKDIR, "rev-parse", "HEAD"],
                                    remove=True, network_mode="none", entrypoint=[])
        commit = out.decode().strip()
        labels = (f'{LABEL_COMMIT}="{commit}" {LABEL_USER}="{USER}" '
                  f'org.repogym.layer-of="{name}"')
        build_dockerfile(client, tag, f"FROM {stage}\nLABEL {labels}\n", {}, progress)
    except docker.errors.DockerException as exc:
        raise ImageBuildError(f"labelling {tag} failed: {exc}") from exc
    finally:
        client.images.remove(stage, noprune=True)
    return BuiltImage(tag, commit, False, time.monotonic() - start)


def probe_image(client: Any, image: str, commit: str) -> dict[str, Any]:
    """Whether ``image`` holds ``commit`` at /testbed (as head or one of its ancestors), and
    which conda environment it activates."""
    script = (f"cd {WORKDIR} 2>/dev/null && git -c safe.directory='*' merge-base "
              f"--is-ancestor {shlex.quote(commit)} HEAD && echo HOLDS; "
              + "".join(f"test -x {env}/bin/python && echo ENV={env}; " for env in CONDA_ENVS)
              + "true")
    try:
        out = client.containers.run(image, ["bash", "-c", script], remove=True, user="root",
                                    network_mode="none", entrypoint=[])
    except docker.errors.DockerException as exc:
        raise ImageBuildError(f"cannot inspect {image}: {exc}") from exc
    text = out.decode(errors="replace")
    envs = [line[4:] for line in text.splitlines() if line.startswith("ENV=")]
    return {"holds": "HOLDS" in text.split(), "env": envs[0] if envs else None}


def layer_dockerfile(image: str, probe: dict[str, Any]) -> str:
    user, workdir, pristine = USER, WORKDIR, PRISTINE
    ident = " ".join(f"{k}={shlex.quote(v)}" for k, v in SNAPSHOT_ENV.items()
                     if k.startswith("GIT_") and "CONFIG" not in k)
    path = f"{probe['env']}/bin:{SEARCH_PATH}" if probe["env"] else None
    env_line = f"ENV PATH={path}\n" if path else ""
    excludes = "\\n".join(DIFF_EXCLUDES)
    return f"""FROM {image}
USER root
{env_line}RUN (id -u {user} >/dev/null 2>&1 || useradd --create-home --uid 1000 --shell /bin/bash \\
      {user}) \\
 && git config --system --add safe.directory {workdir} && cd {workdir} \\
 && git ls-files -z > /tmp/repogym-tracked && rm -rf .git \\
 && git init -q --initial-branch=main \\
 && git add -f --pathspec-from-file=/tmp/repogym-tracked --pathspec-file-nul \\
 && mkdir -p .git/info && printf '{excludes}\\n' > .git/info/exclude && git add -A -- . \\
 && {ident} git -c commit.gpgsign=false commit -q --no-verify --allow-empty -m base \\
 && rm -rf .git/logs .git/hooks .git/ORIG_HEAD .git/FETCH_HEAD /tmp/repogym-tracked \\
 && git gc -q --prune=now && test "$(git rev-list --all | wc -l)" = 1 \\
 && chown -R {user}:{user} {workdir} \\
 && rm -rf {pristine} && mkdir -p {pristine} && cp -a {workdir} {pristine}/testbed \\
 && cp -a /home/{user} {pristine}/home && chmod 700 {pristine}
WORKDIR {workdir}
"""
