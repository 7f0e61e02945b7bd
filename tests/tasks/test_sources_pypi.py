"""The pypi source: fetching an sdist with pip, unpacking it, and making candidates of it.
The index is a local folder (``--find-links`` with ``--no-index``), so no network is needed."""

from __future__ import annotations

import io
import tarfile
import textwrap
import zipfile
from pathlib import Path

import pytest

from repogym.errors import TaskError
from repogym.schema import Task
from repogym.tasks.sources.common import SourceOptions
from repogym.tasks.sources.pypi import (
    PypiOptions,
    PypiSource,
    pin_scm_version,
    sdist_version,
    unpack_sdist,
)

PROJECT = {
    "setup.py": "from setuptools import setup\nsetup(name='tinycalc', version='0.3', "
                "packages=['tinycalc'], extras_require={'test': ['pytest']})\n",
    "PKG-INFO": "Metadata-Version: 2.1\nName: tinycalc\nVersion: 0.3\n",
    "tinycalc/__init__.py": textwrap.dedent('''\
        def double(x):
            """Twice ``x``."""
            if x is None:
                return 0
            return x * 2
        '''),
    "tests/test_tinycalc.py": "from tinycalc import double\n\n\ndef test_double():\n"
                              "    assert double(2) == 4\n\n\ndef test_none():\n"
                              "    assert double(None) == 0\n",
}


def sdist(folder: Path, files: dict[str, str], top: str = "tinycalc-0.3") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{top}.tar.gz"
    with tarfile.open(path, "w:gz") as tf:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{name}" if top else name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def test_requirement_and_kinds_are_checked() -> None:
    assert PypiOptions("tinycalc==0.3").name == "tinycalc"
    with pytest.raises(ValueError, match="NAME==VERSION"):
        PypiOptions("tinycalc>=0.3")
    with pytest.raises(ValueError, match="--kinds"):
        PypiOptions("tinycalc", kinds=("swe",))


def test_unpack_finds_the_project_folder(tmp_path: Path) -> None:
    project = unpack_sdist(sdist(tmp_path / "dl", PROJECT), tmp_path / "out")
    assert project.name == "tinycalc-0.3"
    assert (project / "tinycalc" / "__init__.py").read_text() == PROJECT["tinycalc/__init__.py"]
    archive = tmp_path / "x.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("x-1/setup.py", "")
    assert unpack_sdist(archive, tmp_path / "zip").name == "x-1"


def test_unpack_refuses_paths_outside_the_folder(tmp_path: Path) -> None:
    evil = sdist(tmp_path / "dl", {"../../escape.txt": "x"}, top="")
    with pytest.raises(TaskError, match="unsafe path"):
        unpack_sdist(evil, tmp_path / "out")
    assert not (tmp_path / "escape.txt").exists()


def _options(index: Path, **changes: object) -> PypiOptions:
    base: dict[str, object] = {
        "requirement": "tinycalc==0.3", "find_links": str(index),
        "pip_args": ("--no-index", "--no-build-isolation"), "min_lines": 1,
    }
    base.update(changes)
    return PypiOptions(**base)  # type: ignore[arg-type]


@pytest.mark.slow
def test_sdist_becomes_candidates_of_both_kinds(tmp_path: Path) -> None:
    index = tmp_path / "index"
    sdist(index, PROJECT)
    source = PypiSource(_options(index), SourceOptions(seed=2), tmp_path / "work",
                        derive=lambda t: (t, "ok"), log=lambda _m: None)
    assert source.archive == "tinycalc-0.3.tar.gz"
    assert source.work.name == "pypi/tinycalc"
    kept = [t for t in source.candidates() if isinstance(t, Task)]
    kinds = [t.kind for t in kept]
    assert kinds[:2] == ["replication", "synthetic"]  # interleaved
    assert kinds.count("replication") == 1 and kinds.count("synthetic") > 1
    env = kept[0].environment
    # the snapshot has no git tags: a version read from them would be 0.1.dev1
    assert env.setup[0] == "SETUPTOOLS_SCM_PRETEND_VERSION=0.3 python -m pip install -e '.[test]'"
    assert all(t.source == str(source.work.path) for t in kept)


@pytest.mark.slow
def test_sdist_without_tests_is_refused(tmp_path: Path) -> None:
    index = tmp_path / "index"
    sdist(index, {k: v for k, v in PROJECT.items() if not k.startswith("tests/")})
    with pytest.raises(TaskError, match="ships no tests"):
        PypiSource(_options(index), SourceOptions(), tmp_path / "work", log=lambda _m: None)


def test_a_missing_package_says_what_to_check(tmp_path: Path) -> None:
    (tmp_path / "index").mkdir()
    with pytest.raises(TaskError, match="could not download"):
        PypiSource(_options(tmp_path / "index", requirement="nosuchpkg==1.0"), SourceOptions(),
                   tmp_path / "work", log=lambda _m: None)


def test_the_project_install_is_told_the_sdists_version(tmp_path: Path) -> None:
    (tmp_path / "PKG-INFO").write_text("Metadata-Version: 2.4\nName: iniconfig\nVersion: 2.3.1\n")
    assert sdist_version(tmp_path) == "2.3.1"
    assert sdist_version(tmp_path / "missing") is None
    setup = ("python -m pip install -e .", "python -m pip install 'pytest>=8.4.2'")
    assert pin_scm_version(setup, "2.3.1") == (
        "SETUPTOOLS_SCM_PRETEND_VERSION=2.3.1 python -m pip install -e .", setup[1])
    assert pin_scm_version(setup, None) == setup
    assert pin_scm_version(setup, "1; rm -rf /") == setup
