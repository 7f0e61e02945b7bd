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
