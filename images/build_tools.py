"""The Python base with a C toolchain: what a project that compiles extensions builds on.

repogym's Python bases hold no compiler and no Python headers (an agent's image carries only
what its task needs), so a ``pip install`` that builds C extensions (astropy's, or a pinned
dependency with no wheel for the base's Python) fails there. SWE-bench's images all have
them. A task whose ``environment.build_tools`` is set starts from this image instead: the
base plus Debian's ``build-essential`` and the headers of the base's own Python
(``python3-dev``), one layer shared by every image built on it.
"""

from __future__ import annotations

import time

from repogym import settings
from repogym.errors import ImageBuildError
from repogym.images.build import BUILD_DIR, Layer, build_layer
from repogym.images.python_base import base_tag, ensure_base
from repogym.images.recipe import (
    LABEL_USER,
    PREAMBLE,
    USER,
    WORKDIR,
    BuiltImage,
    build_files,
    digest,
    has_image,
    log_tail,
)
from repogym.progress import Progress
from repogym.sandbox.client import docker_client
from repogym.sandbox.engines import copy_image

BUILD_TOOLS_RECIPE = "1"
PACKAGES = ("build-essential", "python3-dev", "pkg-config")

SCRIPT = PREAMBLE + f"""
phase packages
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \\
  {' '.join(PACKAGES)} >/tmp/apt.log 2>&1 || {{ tail -30 /tmp/apt.log; exit 1; }}
rm -rf /var/lib/apt/lists/* /tmp/apt.log /usr/share/doc /usr/share/man
phase check
PY=$(command -v python3)
"$PY" -c 'import sysconfig, os; h = sysconfig.get_paths()["include"]; \\
assert os.path.exists(os.path.join(h, "Python.h")), h'
cc --version | head -n 1
rm -rf {BUILD_DIR}
"""


def build_tools_tag(python: str) -> str:
    recipe = digest(BUILD_TOOLS_RECIPE, base_tag(python), SCRIPT)
    return f"repogym/base:py{python}-build-{recipe}"


def ensure_build_tools(python: str, progress: Progress = print) -> BuiltImage:
    """The base of ``python`` with the C toolchain, built unless it exists."""
    client = docker_client()
    tag = build_tools_tag(python)
    if has_image(client, tag) or copy_image(tag, client):
        return BuiltImage(tag, "", True, 0.0)
    start = time.monotonic()
    base = ensure_base(python, progress).tag
    progress(f"building {tag} from {base} (Debian's {', '.join(PACKAGES)})")
    run = build_layer(Layer(image=base, tag=tag, script=SCRIPT, files=build_files(),
                            labels={LABEL_USER: USER}, workdir=WORKDIR,
                            timeout=settings.BUILD_TIMEOUT.number()), progress)
    if run.exit_code != 0:
        raise ImageBuildError(f"building {tag} failed (exit {run.exit_code}); its output "
                              f"ends:\n{log_tail(run.log)}")
    return BuiltImage(tag, "", False, time.monotonic() - start)
