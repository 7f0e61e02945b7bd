"""A conda environment.yml as pip steps (pydata__xarray's specs build one; the images have no
conda): names and versions in pip's spelling, what has no package on the index skipped and
said, each dependency installed best effort under the spec's pins."""

from __future__ import annotations

import subprocess
from pathlib import Path

from repogym.images import installed
from repogym.tasks.sources import conda_env, specs

ENVIRONMENT = """\
name: xarray-tests
channels:
  - conda-forge
dependencies:
  - python=3.8
  - cdms2
  - conda-forge::dask
  - hdf5
  - matplotlib-base
  - numpy=1.19
  - pandas>=1.0
  - scipy=1.5.3=py38_0
  - pip
  - pip:
    - numbagg
"""


def test_conda_spelling_becomes_pips() -> None:
    wanted, skipped = conda_env.requirements(ENVIRONMENT)
    assert wanted == ["dask", "matplotlib", "numpy==1.19.*", "pandas>=1.0", "scipy==1.5.3.*",
                      "numbagg"]
    assert skipped == ["python", "cdms2", "hdf5", "pip"]


def test_the_dependencies_are_best_effort_and_the_pins_are_checked(tmp_path: Path) -> None:
    mirror = tmp_path / "m"
    subprocess.run(["git", "init", "-q", str(mirror)], check=True)
    (mirror / "ci").mkdir()
    (mirror / "ci" / "environment.yml").write_text(ENVIRONMENT)
    git = ["git", "-c", "user.name=a", "-c", "user.email=a@b", "-C", str(mirror)]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "env"], check=True)
    commit = subprocess.run(["git", "-C", str(mirror), "rev-parse", "HEAD"], check=True,
                            capture_output=True, text=True).stdout.strip()
    spec = {"python": "3.10", "packages": "environment.yml", "no_use_env": True,
            "env_yml_path": "ci/environment.yml", "pip_packages": ["numpy==1.23.0"],
            "install": "python -m pip install -e ."}
    got = specs.translate(spec, "pydata/xarray", mirror, commit)
    steps = got.environment["env_setup"]
    assert steps[:2] == [specs.INDEX_AS_OF, specs.BUILD_TOOLS]
    steps = steps[2:]
    assert steps[0] == f"printf '%s\\n' numpy==1.23.0 > {conda_env.CONSTRAINTS_FILE}"
    assert steps[1].startswith("for req in dask matplotlib 'numpy==1.19.*'")
    assert f"python -m pip install -c {conda_env.CONSTRAINTS_FILE} \"$req\" ||" in steps[1]
    assert steps[2] == "python -m pip install numpy==1.23.0"
    # what the build checks: the pins, not the best-effort dependencies
    assert installed.pip_requests(steps)["names"] == ["numpy"]
    notes = " ".join(got.provenance["notes"])
    assert "ci/environment.yml: 6 dependencies" in notes and "cdms2, hdf5" in notes
