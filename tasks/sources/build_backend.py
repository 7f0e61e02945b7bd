"""The project's own install, where the plain ``pip install -e .`` of a spec goes wrong.

An editable install of a project whose pinned build backend predates PEP 660:

pylint 2.15's ``pyproject.toml`` pins ``setuptools~=62.6``: that setuptools has no
``build_editable`` hook, and the pip of repogym's images (26, as any since 25) no longer falls
back to ``setup.py develop``, so ``pip install -e .`` fails (``uses a build backend that is
missing the 'build_editable' hook``: pylint-dev__pylint-7993, -7114). The pip of SWE-bench's
environments fell back to ``setup.py develop``, which ran with the environment's own
setuptools. The same here: the project's build requirements go into the environment with
setuptools raised to one that has the hook, and the install runs without build isolation.

An install dated to the project's own time (:func:`dated`): a requirement the project leaves
open (Sphinx 3's ``docutils>=0.12``) resolves against today's index to a release the code
never met (docutils 0.21 changed the nodes Sphinx's tests compare: gold failed on
sphinx-doc__sphinx-8474 and -8273). SWE-bench's images were built when the instances were
made, nearer the code's time.
"""

from __future__ import annotations

import re
import shlex
import tomllib

from packaging.requirements import InvalidRequirement, Requirement

PEP660 = "64"  # the first setuptools with build_editable
_LATER = ("64.0.0", "68.0.0", "70.0.0", "75.1.0")  # any of these satisfying the pin will do
_BACKENDS = ("setuptools.build_meta", "setuptools.build_meta:__legacy__")


def old_setuptools(pyproject: str | None) -> list[str] | None:
    """The build requirements to install, setuptools raised to ``>=64``, when ``pyproject``'s
    build system pins a setuptools with no ``build_editable`` hook; else None."""
    if not pyproject:
        return None
    try:
        system = tomllib.loads(pyproject).get("build-system") or {}
    except tomllib.TOMLDecodeError:
        return None
    if system.get("build-backend", _BACKENDS[0]) not in _BACKENDS:
        return None
    wanted, old = [], False
    for text in system.get("requires") or []:
        try:
            req = Requirement(str(text))
        except InvalidRequirement:
            return None
        if req.name.lower() == "setuptools":
            old = bool(req.specifier) and not any(req.specifier.contains(v) for v in _LATER)
            wanted.append(f"setuptools>={PEP660}")
        else:
            wanted.append(str(req))
    return wanted if old else None


def without_isolation(install: str, requirements: list[str]) -> str:
    """``install`` run with the environment's build requirements instead of an isolated
    build environment (the pip options come right after ``pip install``)."""
    raised = re.sub(r"\bpip install\b", "pip install --no-build-isolation", install, count=1)
    words = " ".join(shlex.quote(r) for r in requirements)
    return f"python -m pip install {words} && {raised}"


DEFAULT_BUILD = ["setuptools>=40.8.0", "wheel"]  # PEP 517's for a project that names none


def build_requirements(pyproject: str | None) -> list[str]:
    """The build system's requirements (``[build-system] requires``), PEP 517's default where
    the project names none."""
    try:
        system = tomllib.loads(pyproject or "").get("build-system") or {}
    except tomllib.TOMLDecodeError:
        return list(DEFAULT_BUILD)
    return [str(r) for r in system.get("requires") or DEFAULT_BUILD]


def dated(install: str, requirements: list[str], as_of: str) -> str:
    """``install`` resolving what it pulls in as of ``as_of`` (pip's uploaded-prior-to, an ISO
    date), its build requirements first from the image's own index date (a build backend of
    then may not run on the image's Python) and the build not isolated, so that it uses them."""
    words = " ".join(shlex.quote(r) for r in requirements)
    raised = (install if "--no-build-isolation" in install else
              re.sub(r"\bpip install\b", "pip install --no-build-isolation", install, count=1))
    return (f"python -m pip install {words} && export PIP_UPLOADED_PRIOR_TO={shlex.quote(as_of)}"
            f" && {raised}")
