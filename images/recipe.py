"""What every image repogym builds has in common: the working folder, the user and the labels
it carries, the script preamble of its build, and the build's failure messages.

Each layer (:mod:`.python_base`, :mod:`.build_tools`, :mod:`.toolchains`, :mod:`.env_image`,
:mod:`.repository`, :mod:`.dataset`) builds on these; this module imports none of them.

``REPOGYM_CA_BUNDLE=/path/ca.pem`` is trusted by every build step and is no part of any image:
each layer is made by running a script in a container and committing it (:mod:`.build`), with
the bundle present only while the script runs, and tags do not depend on it.
"""

from __future__ import annotations

import hashlib
import io
import json
import shlex
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker.errors

from repogym import settings
from repogym.errors import ImageBuildError, SetupFailed, SetupIncomplete
from repogym.images import installed
from repogym.images.build import BUILD_DIR
from repogym.progress import Progress
from repogym.repo import SNAPSHOT_ENV
from repogym.sandbox.client import docker_client
from repogym.sandbox.util import DIFF_EXCLUDES
from repogym.tls import explain_certificate

WORKDIR = "/testbed"
USER = "repogym"
LABEL_SPEC = "org.repogym.spec"
LABEL_COMMIT = "org.repogym.repo-commit"
LABEL_USER = "org.repogym.user"
PRISTINE = "/opt/repogym-pristine"


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


def digest(*parts: object) -> str:
    """A short hash of ``parts`` (bytes as they are, anything else as sorted JSON): a tag's
    content part."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part if isinstance(part, bytes) else json.dumps(part, sort_keys=True).encode())
        h.update(b"\0")
    return h.hexdigest()[:12]


def has_image(client: Any, tag: str) -> bool:
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


def build_files() -> dict[str, bytes]:
    """The build-only files every layer gets: the CA bundle, when there is one."""
    bundle = ca_bundle()
    return {f"{BUILD_DIR}/ca.pem": bundle} if bundle else {}


def failed_phase(log: str) -> str:
    """The last ``phase`` a build script announced before it stopped."""
    phases = [line.split(" ", 1)[1] for line in log.splitlines()
              if line.startswith("REPOGYM-PHASE ")]
    return phases[-1] if phases else ""


def log_tail(log: str, n: int = 30) -> str:
    """The last ``n`` lines of a build's output, without repogym's own marker lines."""
    lines = [line for line in log.splitlines() if not line.startswith("REPOGYM-")]
    return "\n".join(lines[-n:])


def raise_for_build(tag: str, code: int, log: str) -> None:
    """Raises the error a failed build of a task's setup means: the setup's own failure, what
    it did not install, or a failed build."""
    phase = failed_phase(log)
    certificate = explain_certificate(log)
    said = f"; {certificate}" if certificate else ""
    if phase == "setup":
        raise SetupFailed(f"building {tag} failed: a setup command returned a non-zero code "
                          f"({code}){said}; its output ends:\n{log_tail(log)}")
    if phase == "check":
        found = [json.loads(line.split(" ", 1)[1]) for line in log.splitlines()
                 if line.startswith("REPOGYM-MISSING ")]
        if found:
            raise SetupIncomplete(installed.missing_message(tag, found[-1], log))
    raise ImageBuildError(f"building {tag} failed (exit {code}) at {phase or 'start'!r}{said}; "
                          f"its output ends:\n{log_tail(log)}")


def tar_folder(folder: Path, prefix: str = "") -> bytes:
    """The folder's contents as a tar, under ``prefix/`` when given."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for child in sorted(folder.iterdir()):
            tar.add(str(child), arcname=f"{prefix}/{child.name}" if prefix else child.name)
    return buf.getvalue()


def build_dockerfile(
    client: Any, tag: str, dockerfile: str, files: dict[str, bytes], progress: Progress
) -> None:
    """``docker build`` of a Dockerfile and files, for layers that need neither network nor
    the CA bundle (see :mod:`.build`): everything given here is part of the image."""
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
