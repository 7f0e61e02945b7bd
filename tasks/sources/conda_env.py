"""A conda ``environment.yml`` as pip steps (swebench 4's specs for xarray and matplotlib).

swebench created a conda environment from the repository's ``environment.yml`` and installed
the spec's ``pip_packages`` on top. repogym's images have no conda, so the file is read from
the mirror and its dependencies installed with pip:

- conda's spelling becomes pip's (``numpy=1.19`` is ``numpy==1.19.*``, a build string and a
  channel prefix are dropped), and a few names that differ on the package index are mapped
  (``matplotlib-base`` is ``matplotlib``); ``pip:`` entries are taken as they are;
- what has no package on the index (``python``, ``pip``, C libraries such as ``hdf5``, conda
  only packages such as ``cdms2``) is skipped, and the task's provenance says which;
- the dependencies are optional for the tests (they skip without them) and many are large or
  old, so each is installed on its own, best effort, under the spec's ``pip_packages`` as
  constraints (they are the versions the harness ends with): one that cannot be installed here
  leaves a line in the build log and does not fail the build. The ``pip_packages`` themselves
  are installed after, and checked, as any spec's.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

import yaml

CONSTRAINTS_FILE = "/tmp/repogym-constraints.txt"
# conda names that differ on the package index; None: nothing to install with pip
PIP_NAMES: dict[str, str | None] = {
    "python": None, "pip": None, "setuptools": None, "wheel": None,
    "matplotlib-base": "matplotlib", "iris": "scitools-iris", "pytables": "tables",
    "hdf5": None, "libnetcdf": None, "netcdf-fortran": None, "eccodes": None, "cdms2": None,
    "gdal": None, "geos": None, "proj": None, "libgdal": None, "cudatoolkit": None,
    "mkl": None, "blas": None, "openblas": None, "libblas": None, "nodejs": None,
    "pynio": None, "cdat_info": None, "esmpy": None, "compilers": None, "c-compiler": None,
    "cxx-compiler": None, "make": None, "cmake": None, "pkg-config": None, "graphviz": None,
    "ffmpeg": None, "imagemagick": None, "ghostscript": None, "texlive-core": None,
}
_CONDA_SPEC = re.compile(r"^\s*(?:[\w.-]+::)?([A-Za-z0-9][A-Za-z0-9._-]*)\s*(.*)$")


def requirements(text: str) -> tuple[list[str], list[str]]:
    """(pip requirements, conda names skipped) of an ``environment.yml``'s dependencies."""
    data = yaml.safe_load(text) or {}
    deps: list[Any] = list(data.get("dependencies") or []) if isinstance(data, dict) else []
    wanted: list[str] = []
    skipped: list[str] = []
    for dep in deps:
        if isinstance(dep, dict):  # {"pip": [...]}: pip's own spelling already
            wanted += [str(x) for x in dep.get("pip") or []]
            continue
        match = _CONDA_SPEC.match(str(dep))
        if not match:
            continue
        name, version = match.group(1).lower(), match.group(2).strip()
        pip_name = PIP_NAMES.get(name, name)
        if pip_name is None:
            skipped.append(name)
            continue
        wanted.append(pip_name + _pip_version(version))
    return list(dict.fromkeys(wanted)), skipped


def _pip_version(version: str) -> str:
    """conda's version spec as pip's: ``=1.19`` and ``1.19`` (prefixes) are ``==1.19.*``; a
    build string (``=1.19=py39_0``) is dropped; ``>=``, ``<`` and the like stay."""
    version = version.replace(" ", "")
    if not version:
        return ""
    if version.startswith("=="):
        return "==" + version[2:].split("=")[0]
    if version.startswith("=") or version[0].isdigit():
        number = version.lstrip("=").split("=")[0]
        return f"=={number}" if number.endswith("*") else f"=={number}.*"
    return version


def pip_steps(text: str, pins: list[str], path: str) -> tuple[list[str], list[str]]:
    """Setup commands that install ``environment.yml``'s dependencies best effort under
    ``pins``, and the notes that say what was done."""
    wanted, skipped = requirements(text)
    quoted = " ".join(shlex.quote(line) for line in pins)
    steps = [f"printf '%s\\n' {quoted} > {CONSTRAINTS_FILE}" if pins
             else f": > {CONSTRAINTS_FILE}"]
    if wanted:
        words = " ".join(shlex.quote(w) for w in wanted)
        steps.append(f"for req in {words}; do python -m pip install -c {CONSTRAINTS_FILE} "
                     '"$req" || echo "repogym: $req not installed (environment.yml, best '
                     'effort)"; done')
    notes = [f"conda environment {path}: {len(wanted)} dependencies installed with pip, each "
             "best effort under the spec's pip_packages as constraints"]
    if skipped:
        notes.append(f"conda environment {path}: skipped, no package on the index: "
                     f"{', '.join(skipped)}")
    return steps, notes
