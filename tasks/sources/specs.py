"""Environments from the SWE-bench harness's own specs, translated into repogym's.

Two layouts exist:

- **swebench 4.x** published ``MAP_REPO_VERSION_TO_SPECS``: per repository and version, the
  Python version, conda ``packages`` (a list of names, ``requirements.txt`` or
  ``environment.yml``), ``pip_packages``, ``pre_install`` commands, the ``install`` command,
  the ``test_cmd`` and ``eval_commands``. swebench 5 no longer ships that map, so it is read
  from ``tasks/data/swebench4_specs.json``, written from the 4.1.0 wheel by
  ``tools/swebench4_specs.py`` (rerun it to refresh). Files published before swebench 5
  (Lite, Verified, the full set, SWE-Gym) and SWE-rebench's ``install_config`` use it.
- **swebench 5** keeps a spec inside each task: ``image``, ``eval_script`` and ``log_parser``.
  The test command is read from the eval script between the harness's output markers (see
  :func:`from_eval_script`).

swebench 4 built conda environments with scripts that fetched requirement files from the
repository's host. The translation below does the same steps with pip in the base image's
virtual environment, reading requirement files from the local mirror at the instance's
``environment_setup_commit``: requirements (the harness's ``-r`` expansion and exclusions),
conda package names, ``pip_packages``, ``pre_install``, ``install``. Calling swebench 4's own
script makers would need its code next to swebench 5 (the same import name) and would still
emit conda commands and downloads, so the steps are translated here and pinned by tests on the
published values. What cannot be had here is said per instance (:class:`SpecError`): a Python
with no base image is replaced by the nearest one that has it, recorded in the task; a conda
``environment.yml`` becomes pip steps (:mod:`.conda_env`).
"""

from __future__ import annotations

import json
import re
import shlex
import time
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from repogym.envs.grading.testcmd import tox_envs
from repogym.schema import PYTHON_SUITES

from . import build_backend, conda_env
from .common import run_git

DATA = Path(__file__).resolve().parent.parent / "data" / "swebench4_specs.json"
REQUIREMENTS_FILE = "/tmp/repogym-requirements.txt"
SPEC_KEYS = {"python", "packages", "pip_packages", "pre_install", "install", "test_cmd",
             "eval_commands", "reqs_path", "env_yml_path", "log_parser", "no_use_env",
             "execute_test_as_nonroot", "nano_cpus", "env_patches"}
START, END = ">>>>> Start Test Output", ">>>>> End Test Output"
# The package index as swebench 4's specs knew it. Their pins reach mid-2024 (tox 4.16.0,
# setuptools 70.0.0); what they leave unpinned (a project's own requirements, ``pip install
# pytest``) resolved then to the versions of then. Today's index has moved on: setuptools 81
# dropped pkg_resources, which Sphinx 3 imports (every test of sphinx-doc__sphinx-8506 failed
# to import). pip resolves as of this date in the images these specs build.
INDEX_DATE = "2024-10-01T00:00:00Z"
INDEX_AS_OF = f"python -m pip config --site set install.uploaded-prior-to {INDEX_DATE}"
# SWE-bench's conda environments hold pip, setuptools and wheel, and tests use them (pytest's
# own make a namespace package with pkg_resources.declare_namespace in a test file: with
# setuptools pruned, pytest-dev__pytest-11148's gold failed). Asked for by name here, the
# images keep them; pip stays the pinned one (no upgrade is asked for).
BUILD_TOOLS = "python -m pip install pip setuptools wheel"


class SpecError(ValueError):
    """A spec that cannot be built here; the message says why and is the rejection reason."""


@dataclass(frozen=True)
class Translated:
    """A repogym ``environment`` dict and what the translation had to decide."""

    environment: dict[str, Any]
    provenance: dict[str, Any] = field(default_factory=dict)


@cache
def published() -> dict[str, Any]:
    """The swebench 4.x data file (specs, requirement paths, non-test extensions...)."""
    return dict(json.loads(DATA.read_text(encoding="utf-8")))


def harness_spec(repo: str, version: str) -> dict[str, Any] | None:
    """swebench 4.x's spec for a repository and version, or None."""
    return published()["specs"].get(repo, {}).get(version)


def unknown_spec_reason(repo: str, version: str) -> str:
    data = published()
    if repo in data.get("language_specs", {}):  # SWE-bench Multilingual's (specs_langs)
        versions = sorted(data["language_specs"][repo])
        return (f"no spec for {repo} version {version!r} in swebench {data['swebench']}'s "
                f"specs (known: {', '.join(versions[:12])}); add it to an --env YAML")
    if repo in data["other_language_repos"]:
        return (f"no spec repogym can use: {repo} is one of swebench's C, PHP or Ruby "
                "repositories, and repogym has toolchain images for Python, JavaScript, Go, "
                "Rust and Java only; give an --env spec with an image")
    versions = sorted(data["specs"].get(repo, {}))
    if versions:
        return (f"no spec for {repo} version {version!r} in swebench {data['swebench']}'s specs "
                f"(known: {', '.join(versions[:12])}); add it to an --env YAML")
    return f"no spec for {repo} in swebench {data['swebench']}'s specs; add it to an --env YAML"


def nearest_python(wanted: str) -> list[str]:
    """Base image Pythons, nearest to ``wanted`` first (the lower one on a tie: old pins tend
    to install on an older Python)."""
    if wanted in PYTHON_SUITES:
        return [wanted]
    try:
        major, minor = (int(x) for x in wanted.split(".")[:2])
    except ValueError as err:
        raise SpecError(f"python {wanted!r} is not a version like 3.9") from err

    def distance(version: str) -> tuple[int, int]:
        vmajor, vminor = (int(x) for x in version.split("."))
        return abs((vmajor - major) * 100 + vminor - minor), vminor
    return sorted(PYTHON_SUITES, key=distance)


def test_directives(test_patch: str, repo: str) -> list[str]:
    """What swebench appends to the test command: the files the test patch touches, less
    non-test extensions; Django's as module names (the harness's ``get_test_directives``)."""
    exts = published()["non_test_exts"]
    paths = re.findall(r"diff --git a/.* b/(.*)", test_patch)
    paths = [p for p in paths if not any(p.endswith(ext) for ext in exts)]
    if repo == "django/django":
        paths = [p.removesuffix(".py").removeprefix("tests/").replace("/", ".") for p in paths]
    return paths


# ---------------------------------------------------------------------------- swebench 4.x


def translate(spec: dict[str, Any], repo: str, mirror: Path | None, commit: str,
              python: str | None = None, version: str | None = None,
              install_as_of: str | None = None) -> Translated:
    """A swebench 4.x spec as a repogym environment (``python`` forces a base image;
    ``version`` is the instance's, given to setuptools_scm where the project uses it;
    ``install_as_of``, an ISO date, dates what the project's own install pulls in:
    ``build_backend.dated``)."""
    unknown = set(spec) - SPEC_KEYS
    if unknown:
        raise SpecError(f"spec keys repogym does not know: {sorted(unknown)}")
    wanted = str(spec.get("python", "3.11"))
    chosen = python or nearest_python(wanted)[0]
    provenance: dict[str, Any] = {"python_requested": wanted}
    notes: list[str] = []
    if chosen != wanted:
        notes.append(f"Python {wanted} has no base image here; built with {chosen}")
    # swebench's environment image holds the packages, its instance image the checkout, the
    # pre-install commands (they edit the repository's files) and the install: so here
    # (``repogym.images.env_image``), the install pre-run at the environment setup commit
    env_setup = [INDEX_AS_OF, BUILD_TOOLS, *_package_steps(spec, repo, mirror, commit, notes)]
    notes.append(f"the package index as of {INDEX_DATE} (pip's uploaded-prior-to)")
    setup = [str(cmd) for cmd in spec.get("pre_install") or []]
    install = spec.get("install")
    if install:
        install = _editable(str(install), notes)
        pyproject = _show(mirror, commit, "pyproject.toml") if mirror is not None else None
        build = (build_backend.old_setuptools(pyproject)
                 if mirror is not None and " -e " in f" {install} " else None)
        if build:
            notes.append("the build system pins a setuptools with no build_editable hook: "
                         f"installed without build isolation, with {' '.join(build)}")
        if install_as_of:
            notes.append(f"the project's install resolved as of {install_as_of}, its "
                         "environment commit's date (gold fails with the index of "
                         f"{INDEX_DATE[:10]})")
            install = build_backend.dated(
                install, build or build_backend.build_requirements(pyproject), install_as_of)
        elif build:
            install = build_backend.without_isolation(install, build)
        if version and mirror is not None and _uses_scm(mirror, commit):
            # the image's history is one commit with no tags, so setuptools_scm would call the
            # package 0.1.dev1 and a ``minversion`` in its own config (pytest's) refuses to
            # run; the harness's clones keep their tags
            notes.append(f"setuptools_scm given the instance's version {version}: the "
                         "image's history has no tags")
            install = f"export SETUPTOOLS_SCM_PRETEND_VERSION={shlex.quote(version)}; {install}"
        setup.append(install)
    test_cmd = str(spec.get("test_cmd") or "pytest -rA")
    if isinstance(spec.get("test_cmd"), list):
        raise SpecError("a test_cmd with several commands cannot be graded as one run")
    view = tox_view(test_cmd)
    if view:
        setup.append(view)
        notes.append("tox --current-env's environment folder made a view of the image's "
                     "virtual environment, so the harness's own command runs the tests in it")
    prefix = [str(c) for c in spec.get("eval_commands") or []]
    if prefix:
        test_cmd = " && ".join([*prefix, test_cmd])
    if notes:
        provenance["notes"] = notes
    # SWE-bench's images all have a C compiler: installs that build extensions (astropy's, a
    # pinned dependency with no wheel for this Python) need one
    env: dict[str, Any] = {"python": chosen, "env_setup": env_setup, "setup": setup,
                           "test_cmd": test_cmd, "build_tools": True}
    if mirror is not None:
        env["env_commit"] = commit
    if spec.get("log_parser"):
        env["log_parser"] = str(spec["log_parser"])
    return Translated(env, provenance)


def commit_date(mirror: Path, commit: str) -> str:
    """The commit's date in UTC, as pip's uploaded-prior-to reads it."""
    stamp = run_git(mirror, "show", "-s", "--format=%ct", commit).strip()
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(stamp)))


def tox_view(test_cmd: str) -> str | None:
    """A setup command for a test command run by ``tox --current-env``: tox-current-env
    starts the tests with links to the running interpreter in ``.tox/ENV/bin``, and a link to
    a virtual environment's interpreter outside it starts Python without the environment (no
    pytest, no project; SWE-bench's conda environments have no such trouble). Each named
    environment's folder is made a view of the image's environment (its ``pyvenv.cfg`` and
    ``lib``), which the links then start in, as SWE-bench's eval script runs them. The folder
    is one git ignores in such repositories (Sphinx's ``.tox/``)."""
    if "--current-env" not in test_cmd:
        return None
    names = tox_envs(test_cmd)
    if not names:
        return None
    folders = " ".join(shlex.quote(f".tox/{name}") for name in names)
    return (f'for env in {folders}; do mkdir -p "$env/bin" && cp "$VIRTUAL_ENV/pyvenv.cfg" '
            '"$env/" && ln -sfn "$VIRTUAL_ENV/lib" "$env/lib"; done')


def _uses_scm(mirror: Path, commit: str) -> bool:
    """Whether the project's build configuration at ``commit`` names setuptools_scm."""
    for path in ("setup.py", "setup.cfg", "pyproject.toml"):
        kind = run_git(mirror, "cat-file", "-t", f"{commit}:{path}", check=False).strip()
        if kind == "blob" and re.search(r"setuptools[_-]scm",
                                        run_git(mirror, "show", f"{commit}:{path}")):
            return True
    return False


def _package_steps(spec: dict[str, Any], repo: str, mirror: Path | None, commit: str,
                   notes: list[str]) -> list[str]:
    packages = spec.get("packages") or ""
    steps: list[str] = []
    if packages == "environment.yml" or spec.get("env_yml_path"):
        given = spec.get("env_yml_path")
        paths = ([given] if isinstance(given, str) else list(
            given or published()["env_yml_paths"].get(repo) or ["environment.yml"]))
        found = next(((path, text) for path in paths
                      if mirror and (text := _show(mirror, commit, path)) is not None), None)
        if found is None:
            raise SpecError(f"the spec builds a conda environment from {paths}, and none is in "
                            f"the mirror at {commit[:12]}")
        pins = [str(p) for p in spec.get("pip_packages") or []]
        conda_steps, conda_notes = conda_env.pip_steps(found[1], pins, found[0])
        steps += conda_steps
        notes += conda_notes
    elif packages == "requirements.txt" or spec.get("reqs_path"):
        paths = spec.get("reqs_path") or published()["reqs_paths"].get(repo) or []
        text = requirements(mirror, commit, list(paths)) if mirror else None
        if text is None:
            raise SpecError(f"requirements file {paths} not found in the mirror at {commit[:12]}")
        # one line: setup commands become RUN instructions, which end at a newline
        lines = " ".join(shlex.quote(line) for line in text.split("\n"))
        steps.append(f"printf '%s\\n' {lines} > {REQUIREMENTS_FILE}")
        steps.append(f"python -m pip install -r {REQUIREMENTS_FILE}")
    elif packages:
        names = [_conda_to_pip(p) for p in shlex.split(str(packages))]
        notes.append(f"conda packages {packages!r} installed with pip")
        steps.append("python -m pip install " + " ".join(shlex.quote(n) for n in names))
    pip = [str(p) for p in spec.get("pip_packages") or []]
    if pip:
        steps.append("python -m pip install " + " ".join(shlex.quote(p) for p in pip))
    return steps


def _conda_to_pip(name: str) -> str:
    """``numpy=1.19`` (conda's exact pin) is ``numpy==1.19`` to pip."""
    return re.sub(r"(?<![<>=!~])=(?!=)", "==", name, count=1)


def _editable(install: str, notes: list[str]) -> str:
    """swebench reinstalls the package in its eval script, after the prediction is applied,
    so the tests import the patched code; an editable install made at build time does that
    once for every patch (the grading container has no network to reinstall)."""
    plain = re.fullmatch(r"(python -m )?pip install (\.|\./)", install.strip())
    if plain:
        notes.append(f"install {install!r} made editable: the tests must see the patched code")
        return f"{plain.group(1) or ''}pip install -e ."
    return install


def _show(mirror: Path, commit: str, path: str) -> str | None:
    """A file's text at ``commit`` in the mirror, or None."""
    kind = run_git(mirror, "cat-file", "-t", f"{commit}:{path}", check=False).strip()
    return run_git(mirror, "show", f"{commit}:{path}") if kind == "blob" else None


def requirements(mirror: Path, commit: str, paths: list[str]) -> str | None:
    """The first of ``paths`` found at ``commit``, with ``-r`` files inlined and the lines
    the harness drops removed (``get_requirements_by_commit``, read from the mirror)."""
    def show(path: str) -> str | None:
        return _show(mirror, commit, path)

    def excluded(line: str) -> bool:
        return any(line.strip().startswith(x) for x in ("-e .", "#", ".[test"))

    for path in paths:
        text = show(path)
        if text is None:
            continue
        folder = "/".join(path.split("/")[:-1])
        original, extra = [], []
        for line in text.split("\n"):
            if line.strip().startswith("-r"):
                name = line.strip()[len("-r"):].strip()
                nested = show(f"{folder}/{name}" if folder else name) or ""
                extra += [x for x in nested.split("\n") if not excluded(x)]
            elif not excluded(line):
                original.append(line)
        extra.append("\n".join(original))
        return _clean_requirements("\n".join(extra))
    return None


def _clean_requirements(text: str) -> str:
    """Packages yanked from the index, replaced as swebench 4 replaces them."""
    for old, new in published()["replace_req_packages"]:
        pattern = rf"^{re.escape(old)}([<>=!~]=?.*|$)"
        text = re.sub(pattern + r"\n?" if new is None else pattern, new or "", text,
                      flags=re.MULTILINE)
    return text


# ---------------------------------------------------------------------------- swebench 5


def from_eval_script(instance: dict[str, Any]) -> Translated:
    """The test command of a swebench 5 task, read from its eval script: the command between
    the output markers, less the test directives it ends with (they become ``test_files``, so
    the grader can add its own files to the same run), after the environment lines that come
    before it (``source``, ``conda activate``, ``export``)."""
    from swebench.harness.utils import parse_eval_script

    lines = parse_eval_script(str(instance["eval_script"]))
    try:
        start = next(i for i, line in enumerate(lines) if START in line)
        end = next(i for i, line in enumerate(lines) if END in line)
    except StopIteration as err:
        raise SpecError("the eval script has no test output markers") from err
    commands = [line for line in lines[start + 1:end] if line.strip()]
    if len(commands) != 1:
        raise SpecError(f"the eval script runs {len(commands)} commands between its markers; "
                        "repogym grades one test command")
    command = commands[0]
    directives = test_directives(str(instance.get("test_patch", "")), str(instance["repo"]))
    words = shlex.split(command)
    files: list[str] = []
    if directives and words[-len(directives):] == directives:
        files = directives
        command = shlex.join(words[: -len(directives)])
    prefix = [line for line in lines[:start]
              if re.match(r"\s*(source|conda activate|export|\. )", line)]
    env: dict[str, Any] = {"image": str(instance["image"]), "test_cmd":
                           " && ".join([*prefix, command]),
                           "log_parser": str(instance.get("log_parser") or "parse_log_pytest")}
    if files:
        env["test_files"] = files
    return Translated(env, {"eval_script": "swebench 5 task"})
