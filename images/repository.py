"""Layered images with a content-hash cache.

``base``: a Python with git and bash, an unprivileged user ``repogym`` and an isolated virtual
environment at /opt/venv (first on PATH) holding pip and a pinned pytest (:data:`TOOLCHAIN`,
per Python version: it decides grades), both from the package index. The environment sees none
of the distribution's Python packages: the root image has none (see :mod:`.rootfs`), and the
venv is not made with ``--system-site-packages``. The root is taken from
``REPOGYM_BASE_IMAGE`` when the engine has it (or can pull it with ``REPOGYM_PULL=1``);
otherwise built here with debootstrap and ``docker import``, which needs no registry at all.

``repo``: the repository at its base commit as one commit at /testbed (no history, refs, reflog
or remotes), then the task's ``setup`` commands, with network at build time only. What the
setup's pip commands asked for is then checked (:mod:`.installed`): a setup that exits 0 but
installed nothing fails the build. Then pip, setuptools and wheel leave the environment unless
asked for or needed (their vendored copies of other projects would otherwise be readable by the
agent). One image per (repository, commit, environment); an unchanged spec is a cache hit.

``REPOGYM_CA_BUNDLE=/path/ca.pem`` is trusted by every build step and is no part of any image:
each layer is made by running a script in a container and committing it (:mod:`.build`), with
the bundle present only while the script runs, and tags do not depend on it.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shlex
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker.errors

from repogym import settings
from repogym.errors import ImageBuildError, SetupFailed, SetupIncomplete
from repogym.images import install_links, installed
from repogym.images import lru as image_lru
from repogym.images.build import BUILD_DIR, Layer, build_layer
from repogym.images.rootfs import debootstrap, rootfs_tag
from repogym.progress import Progress
from repogym.repo import SNAPSHOT_ENV, export_tree, snapshot
from repogym.sandbox.client import docker_client
from repogym.sandbox.engines import copy_image
from repogym.sandbox.util import DIFF_EXCLUDES
from repogym.schema import PYTHON_SUITES, Environment, Task
from repogym.tls import explain_certificate

WORKDIR = "/testbed"
USER = "repogym"
VENV = "/opt/venv"
LABEL_SPEC = "org.repogym.spec"
LABEL_COMMIT = "org.repogym.repo-commit"
LABEL_USER = "org.repogym.user"
RECIPE_VERSION = "2"  # the base images
REPO_RECIPE = "7"  # repository images (4: what setup writes is committed, ``settle_script``;
#                    5: the repository is importable by plain `pytest`, ``_IMPORTABLE``;
#                    6: the install's copies of repository files are links, ``install_links``;
#                    7: build tools the repository imports stay, ``installed.imported_tools``)
LANG_RECIPE = "2"  # other languages' repository layer
PRISTINE = "/opt/repogym-pristine"
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


@dataclass(frozen=True)
class BuiltImage:
    tag: str
    repo_commit: str
    cached: bool
    seconds: float


def ca_bundle() -> bytes:
    path = settings.CA_BUNDLE.get()
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


# What every build script starts with: the CA bundle, when given, is trusted through the
# environment of this one run (never written where the committed image keeps it), and pip
# keeps no cache in the image.
PREAMBLE = f"""set -e
if [ -s {BUILD_DIR}/ca.pem ]; then
  cat /etc/ssl/certs/ca-certificates.crt {BUILD_DIR}/ca.pem > {BUILD_DIR}/trust.pem 2>/dev/null \\
    || cp {BUILD_DIR}/ca.pem {BUILD_DIR}/trust.pem
  export PIP_CERT={BUILD_DIR}/trust.pem SSL_CERT_FILE={BUILD_DIR}/trust.pem \\
    REQUESTS_CA_BUNDLE={BUILD_DIR}/trust.pem CURL_CA_BUNDLE={BUILD_DIR}/trust.pem \\
    GIT_SSL_CAINFO={BUILD_DIR}/trust.pem NODE_EXTRA_CA_CERTS={BUILD_DIR}/ca.pem
fi
export PIP_NO_CACHE_DIR=1 PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1
phase() {{ echo "REPOGYM-PHASE $1"; }}
"""


def _build_files() -> dict[str, bytes]:
    bundle = ca_bundle()
    return {f"{BUILD_DIR}/ca.pem": bundle} if bundle else {}


def _failed_phase(log: str) -> str:
    phases = [line.split(" ", 1)[1] for line in log.splitlines()
              if line.startswith("REPOGYM-PHASE ")]
    return phases[-1] if phases else ""


def _tail(log: str, n: int = 30) -> str:
    lines = [line for line in log.splitlines() if not line.startswith("REPOGYM-")]
    return "\n".join(lines[-n:])


# --- base ------------------------------------------------------------------------------------


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
    digest = _digest(RECIPE_VERSION, python, _root_name(python), _base_script(python))
    return f"repogym/base:py{python}-{digest}"


def ensure_base(python: str = "3.11", progress: Progress = print) -> BuiltImage:
    client = docker_client()
    tag = base_tag(python)
    if _has_image(client, tag) or copy_image(tag, client):
        return BuiltImage(tag, "", True, 0.0)
    start = time.monotonic()
    root = _root_image(client, python, progress)
    progress(f"building {tag} from {root}")
    run = build_layer(Layer(image=root, tag=tag, script=_base_script(python),
                            files=_build_files(), labels={LABEL_USER: USER}, env=BASE_ENV,
                            workdir=WORKDIR, timeout=settings.BUILD_TIMEOUT.number()), progress)
    if run.exit_code != 0:
        certificate = explain_certificate(run.log)
        raise ImageBuildError(
            f"building {tag} failed (exit {run.exit_code}) at {_failed_phase(run.log)!r}"
            f"{'; ' + certificate if certificate else ''}; its output ends:\n{_tail(run.log)}\n"
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
                                files=_build_files(), labels={LABEL_USER: USER}, env=BASE_ENV,
                                workdir=WORKDIR, timeout=settings.BUILD_TIMEOUT.number()), progress)
        if run.exit_code != 0:
            raise ImageBuildError(f"building the base failed at {_failed_phase(run.log)!r}:\n"
                                  f"{_tail(run.log)}")
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
        if _has_image(client, configured):
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
    if not _has_image(client, tag):
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


# --- repository images -----------------------------------------------------------------------


def image_spec(task: Task) -> dict[str, Any]:
    """What decides a repository image: repository, commit, environment, and the base it
    starts from (never the CA bundle: the same suite is the same images with or without)."""
    from repogym.images.env_image import env_tag, is_shared  # builds on this module

    env = task.environment
    return {
        "recipe": REPO_RECIPE,
        "repo": task.repo,
        "commit": task.base_commit,  # names the content: the source's path does not matter
        "python": env.python,
        "image": env.image,
        "base": None if env.image else _base_name(env),
        **({"env": env_tag(task)} if is_shared(env) else {}),
        **({"language": env.language, "lang_recipe": LANG_RECIPE}
           if env.language != "python" else {}),
        "setup": list(env.setup),
    }


def image_tag(task: Task) -> str:
    slug = "".join(c if c.isalnum() else "-" for c in task.repo.lower()).strip("-")[:60] or "repo"
    return f"repogym/repo:{slug}-{_digest(image_spec(task))}"


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
    from repogym.images.dataset import ensure_layered  # a dataset's image that holds the repo
    from repogym.images.env_image import ensure_env, is_shared  # builds on this module

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
    start = time.monotonic()
    env = task.environment
    root = (ensure_env(task, progress).tag if is_shared(env)
            else env.image or _root_for(env, progress))
    with tempfile.TemporaryDirectory(prefix="repogym-ctx-") as tmp:
        tree = Path(tmp) / "testbed"
        export_tree(task.source, task.base_commit, tree)
        commit = snapshot(tree)
        progress(f"building {tag} ({task.repo} at {task.base_commit[:12]})")
        wanted = installed.pip_requests(env.setup, WORKDIR)
        # what the environment image's setup asked for by name stays (the build tools too)
        wanted["names"] = sorted({*wanted["names"],
                                  *installed.pip_requests(env.env_setup, WORKDIR)["names"]})
        files = {**_build_files(), f"{BUILD_DIR}/wanted.json": json.dumps(wanted).encode(),
                 f"{BUILD_DIR}/installed.py": Path(installed.__file__).read_bytes(),
                 f"{BUILD_DIR}/install_links.py": Path(install_links.__file__).read_bytes()}
        labels = {LABEL_COMMIT: commit, LABEL_SPEC: _digest(image_spec(task)), LABEL_USER: USER}
        run = build_layer(Layer(
            image=root, tag=tag, script=_repo_script(task.environment), files=files,
            archives=(("/", _tar_folder(tree, WORKDIR.lstrip("/"))),), labels=labels,
            workdir=WORKDIR, timeout=settings.BUILD_TIMEOUT.number(),
            script_labels=(LABEL_COMMIT,)), progress)
    if run.exit_code != 0:
        _raise_for(tag, run.exit_code, run.log)
    return BuiltImage(tag, run.labels.get(LABEL_COMMIT, commit), False, time.monotonic() - start)


def _raise_for(tag: str, code: int, log: str) -> None:
    phase = _failed_phase(log)
    certificate = explain_certificate(log)
    said = f"; {certificate}" if certificate else ""
    if phase == "setup":
        raise SetupFailed(f"building {tag} failed: a setup command returned a non-zero code "
                          f"({code}){said}; its output ends:\n{_tail(log)}")
    if phase == "check":
        found = [json.loads(line.split(" ", 1)[1]) for line in log.splitlines()
                 if line.startswith("REPOGYM-MISSING ")]
        if found:
            raise SetupIncomplete(installed.missing_message(tag, found[-1], log))
    raise ImageBuildError(f"building {tag} failed (exit {code}) at {phase or 'start'!r}{said}; "
                          f"its output ends:\n{_tail(log)}")


def _base_name(env: Environment) -> str:
    if env.language == "python" and env.build_tools:
        from repogym.images.build_tools import build_tools_tag  # builds on the base

        return build_tools_tag(env.python)
    if env.language == "python":
        return base_tag(env.python)
    from repogym.images.toolchains import toolchain_tag

    return toolchain_tag(env.language)


def _root_for(env: Environment, progress: Progress) -> str:
    if env.language == "python" and env.build_tools:
        from repogym.images.build_tools import ensure_build_tools  # builds on the base

        return ensure_build_tools(env.python, progress).tag
    if env.language == "python":
        return ensure_base(env.python, progress).tag
    from repogym.images.toolchains import ensure_toolchain  # other languages' base images

    return ensure_toolchain(env.language, progress).tag


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


def settle_script(workdir: str) -> str:
    """What the setup left in the repository becomes the base an agent starts from.

    Installs write into the tree: ``*.egg-info``, a setuptools_scm ``write_to`` version file,
    compiled extensions, ``package-lock.json``, ``Cargo.lock``. Left out of the base commit,
    they would enter every agent's diff, which then would not apply in a grading container
    that has them already: no agent could solve the task. So every change the setup made that
    git does not ignore is folded into the one base commit (same identity and date as the
    snapshot's, so the same tree is the same commit), and the caches and build metadata an
    agent's diff leaves out (``DIFF_EXCLUDES``) are excluded for ``git status`` too. The script
    prints the commit as the image's label."""
    ident = " ".join(f"{k}={shlex.quote(v)}" for k, v in SNAPSHOT_ENV.items()
                     if k.startswith("GIT_") and "CONFIG" not in k)
    excludes = "\\n".join(DIFF_EXCLUDES)
    return f"""cd {workdir}
mkdir -p .git/info && printf '{excludes}\\n' >> .git/info/exclude
git -c core.hooksPath=/dev/null add -A -- .
if ! git diff --cached --quiet; then
  {ident} git -c core.hooksPath=/dev/null -c commit.gpgsign=false commit -q --amend \\
    --no-verify --allow-empty -m base
fi
echo "REPOGYM-LABEL {LABEL_COMMIT}=$(git rev-parse HEAD)"
cd /"""


def _tar_folder(folder: Path, prefix: str = "") -> bytes:
    """The folder's contents as a tar, under ``prefix/`` when given."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for child in sorted(folder.iterdir()):
            tar.add(str(child), arcname=f"{prefix}/{child.name}" if prefix else child.name)
    return buf.getvalue()


def _build(
    client: Any, tag: str, dockerfile: str, files: dict[str, bytes], progress: Progress
) -> None:
    """``docker build`` of a Dockerfile and files, for layers that need neither network nor
    the CA bundle (see :mod:`.layer`): everything given here is part of the image."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in {"Dockerfile": dockerfile.encode(), **files}.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    buf.seek(0)
    log: list[str] = []
    try:
        for chunk in client.api.build(fileobj=buf, custom_context=True, tag=tag, rm=True,
                                      forcerm=True, decode=True, network_mode="bridge"):
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
