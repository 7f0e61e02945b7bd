"""Test commands run by tox (Sphinx's `tox --current-env -epy39 -v --`): tox's state stays out
of the repository, which a grading run may not write to, and tox-current-env's links to the
interpreter start in the image's virtual environment (sphinx-doc__sphinx-8506: first
`PermissionError: '/testbed/.tox'`, then `No module named pytest`, every test missing)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from repogym.envs.grading.testcmd import TOX_WORKDIR, runs_tox, state_outside, tox_envs
from repogym.tasks.sources.specs import tox_view

SPHINX = "tox --current-env -epy39 -v --"


def test_tox_gets_a_work_folder_outside_the_repository() -> None:
    assert state_outside("pytest -rA") == "pytest -rA"
    assert state_outside("tox --workdir /x -e py --") == "tox --workdir /x -e py --"
    assert state_outside("tox -e py --") == f"tox --workdir {TOX_WORKDIR} -e py --"
    assert state_outside("cat tox.ini; /usr/bin/tox -e a --").endswith(
        f"/usr/bin/tox --workdir {TOX_WORKDIR} -e a --")
    command = state_outside(SPHINX)
    assert command.endswith(f"tox --workdir {TOX_WORKDIR} --current-env -epy39 -v --")
    assert f"{TOX_WORKDIR}/py39" in command.split("; tox")[0]


def test_the_environments_a_tox_command_names() -> None:
    assert tox_envs(SPHINX) == ["py39"]
    assert tox_envs("tox -e py38,py39 -- -k x") == ["py38", "py39"]
    assert tox_envs("tox --env=lint -- -e notmine") == ["lint"]
    assert tox_envs("tox -v --") == []


def test_a_command_runs_tox_when_tox_is_a_word_of_it() -> None:
    """Then all of tox.ini configures the run, and an agent's change to it is removed."""
    assert runs_tox(SPHINX) and runs_tox("/usr/bin/tox") and runs_tox("cd x && tox -e py")
    assert not runs_tox("python -m pytest -rA tests/test_tox.py")


def test_a_link_to_the_interpreter_starts_in_the_view(tmp_path: Path) -> None:
    """What the view does, with a virtual environment made here: a bare link to its
    interpreter starts without it, a link inside the view starts with its packages."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python3*/site-packages"))
    (site / "only_in_the_venv.py").write_text("X = 1\n")
    python = venv / "bin" / "python"
    probe = "import only_in_the_venv"
    (tmp_path / "bare" / "bin").mkdir(parents=True)
    (tmp_path / "bare" / "bin" / "python").symlink_to(python)
    bare = subprocess.run([str(tmp_path / "bare" / "bin" / "python"), "-c", probe],
                          capture_output=True, text=True, cwd=tmp_path)
    assert bare.returncode != 0 and "No module named 'only_in_the_venv'" in bare.stderr
    view = tox_view(SPHINX)
    assert view is not None
    subprocess.run(["bash", "-c", view], cwd=tmp_path, check=True,
                   env={"VIRTUAL_ENV": str(venv), "PATH": "/usr/bin:/bin"})
    (tmp_path / ".tox" / "py39" / "bin" / "python").symlink_to(python)
    linked = subprocess.run([str(tmp_path / ".tox" / "py39" / "bin" / "python"), "-c", probe],
                            capture_output=True, text=True, cwd=tmp_path)
    assert linked.returncode == 0, linked.stderr
    assert tox_view("pytest -rA") is None and tox_view("tox -e py --") is None
