"""pylint 2.15's build system pins setuptools~=62.6, which has no build_editable hook; pip 26
no longer falls back to setup.py develop (pylint-dev__pylint-7993: `uses a build backend that
is missing the 'build_editable' hook`). The install then runs without build isolation, on
the build requirements with a setuptools that has the hook."""

from __future__ import annotations

import subprocess
from pathlib import Path

from repogym.tasks.sources import build_backend, specs

PYLINT = """\
[build-system]
requires = ["setuptools~=62.6", "wheel~=0.37.1"]
build-backend = "setuptools.build_meta"
"""


def test_a_pin_without_the_hook_is_raised_and_isolation_dropped() -> None:
    assert build_backend.old_setuptools(PYLINT) == ["setuptools>=64", "wheel~=0.37.1"]
    for fine in ('[build-system]\nrequires = ["setuptools>=40.8", "wheel"]\n',
                 '[build-system]\nrequires = ["setuptools"]\n',
                 '[build-system]\nrequires = ["flit_core"]\nbuild-backend = "flit_core.buildapi"\n',
                 "[project]\nname = 'x'\n", "not toml [", None):
        assert build_backend.old_setuptools(fine) is None, fine
    assert build_backend.without_isolation("python -m pip install -e .", ["setuptools>=64"]) == (
        "python -m pip install 'setuptools>=64' && python -m pip install --no-build-isolation -e .")


def test_the_spec_translation_uses_it(tmp_path: Path) -> None:
    mirror = tmp_path / "m"
    subprocess.run(["git", "init", "-q", str(mirror)], check=True)
    (mirror / "pyproject.toml").write_text(PYLINT)
    git = ["git", "-c", "user.name=a", "-c", "user.email=a@b", "-C", str(mirror)]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    commit = subprocess.run(["git", "-C", str(mirror), "rev-parse", "HEAD"], check=True,
                            capture_output=True, text=True).stdout.strip()
    got = specs.translate({"python": "3.9", "install": "python -m pip install -e ."},
                          "pylint-dev/pylint", mirror, commit)
    assert got.environment["setup"][-1].endswith(
        "&& python -m pip install --no-build-isolation -e .")
    assert any("no build_editable hook" in n for n in got.provenance["notes"])


def test_an_install_dated_to_the_projects_time(tmp_path: Path) -> None:
    """sphinx-doc__sphinx-8474: Sphinx 3.5 asks for docutils>=0.12, today's index gives 0.21,
    whose nodes its tests no longer match. Dated to the environment commit, the install takes
    the docutils of then; the build requirements come first, from the image's index date."""
    mirror = tmp_path / "m"
    subprocess.run(["git", "init", "-q", str(mirror)], check=True)
    (mirror / "setup.py").write_text("from setuptools import setup\nsetup(name='x')\n")
    git = ["git", "-c", "user.name=a", "-c", "user.email=a@b", "-C", str(mirror)]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True,
                   env={"GIT_COMMITTER_DATE": "2020-12-24T18:30:00+01:00", "PATH": "/usr/bin:/bin",
                        "HOME": str(tmp_path)})
    commit = subprocess.run(["git", "-C", str(mirror), "rev-parse", "HEAD"], check=True,
                            capture_output=True, text=True).stdout.strip()
    when = specs.commit_date(mirror, commit)
    assert when == "2020-12-24T17:30:00Z"
    spec = {"python": "3.9", "install": "python -m pip install -e ."}
    got = specs.translate(spec, "sphinx-doc/sphinx", mirror, commit, install_as_of=when)
    assert got.environment["setup"][-1] == (
        "python -m pip install 'setuptools>=40.8.0' wheel && export "
        "PIP_UPLOADED_PRIOR_TO=2020-12-24T17:30:00Z && "
        "python -m pip install --no-build-isolation -e .")
    assert any("resolved as of 2020-12-24T17:30:00Z" in n for n in got.provenance["notes"])
    plain = specs.translate(spec, "sphinx-doc/sphinx", mirror, commit)
    assert plain.environment["setup"][-1] == "python -m pip install -e ."
    # with the old-setuptools pin, its raised requirements are the ones installed first
    assert build_backend.dated("pip install --no-build-isolation -e .", ["setuptools>=64"],
                               "2022-01-01T00:00:00Z") == (
        "python -m pip install 'setuptools>=64' && export PIP_UPLOADED_PRIOR_TO="
        "2022-01-01T00:00:00Z && pip install --no-build-isolation -e .")
    assert build_backend.build_requirements(PYLINT) == ["setuptools~=62.6", "wheel~=0.37.1"]
