"""Detecting how to install a repository and run its tests from its own files."""

from __future__ import annotations

import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

from repogym.tasks.sources.detect import EnvOverrides, detect_environment, has_tests
from repogym.tasks.sources.tree_view import DirTree, GitTree


def tree(root: Path, files: dict[str, str]) -> DirTree:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return DirTree(root)


def test_pyproject_with_test_extra_and_plugins(tmp_path: Path) -> None:
    env = detect_environment(tree(tmp_path, {
        "pyproject.toml": """\
            [project]
            name = "pkg"
            requires-python = ">=3.8"
            [project.optional-dependencies]
            test = ["pytest", "hypothesis"]
            docs = ["sphinx"]
            [tool.pytest.ini_options]
            addopts = "--cov=pkg"
            asyncio_mode = "auto"
            """,
        "tests/test_pkg.py": "def test_x(): pass\n",
    }))
    assert env.python == "3.11"
    assert env.test_cmd == "python -m pytest -rA" and env.log_parser == "pytest"
    assert env.setup == ("python -m pip install -e '.[test]'",
                         "python -m pip install pytest-cov pytest-asyncio",
                         "python -m pip install 'pytest>=4.6'")


def test_setup_cfg_and_setup_py_extras_and_requirement_files(tmp_path: Path) -> None:
    env = detect_environment(tree(tmp_path, {
        "setup.cfg": """\
            [metadata]
            name = pkg
            [options]
            python_requires = >=3.6, <3.10
            [options.extras_require]
            testing = pytest
            [tool:pytest]
            addopts = -n 2
            """,
        "setup.py": "from setuptools import setup\nsetup(tests_require=['mock'], "
                    "extras_require={'dev': ['black']})\n",
        "requirements-test.txt": "pytest\n",
        "requirements/dev.txt": "flake8\n",
        "tox.ini": "[testenv]\ndeps =\n    pytest-mock\n    -rrequirements.txt\n"
                   "    {env:EXTRA:}\ncommands = pytest\n",
    }))
    assert env.python == "3.9"  # the newest base image the package accepts
    assert env.setup == (
        "python -m pip install -e '.[testing,dev]'",
        "python -m pip install -r requirements-test.txt",
        "python -m pip install -r requirements/dev.txt",
        "python -m pip install mock pytest-mock pytest-xdist",
        "python -m pip install 'pytest>=4.6'",
    )


def test_unpackaged_repository_uses_requirements(tmp_path: Path) -> None:
    env = detect_environment(tree(tmp_path, {
        "requirements.txt": "numpy\n",
        "app.py": "import numpy\n",
        "test_app.py": "def test_app(): pass\n",
    }))
    assert env.setup == ("python -m pip install -r requirements.txt",
                         "python -m pip install 'pytest>=4.6'")


def test_a_pytest_older_than_the_harness_is_upgraded_after_the_pins(tmp_path: Path) -> None:
    """funcy's history pins pytest==2.4.2, which has no ``pytest.hookimpl``: every run of the
    harness's plugin failed ("tests not collected"). The last command asks for 4.6 or later, and
    for a ``py`` that pytest can use in place of the pinned 1.4.17 (else INTERNALERROR)."""
    env = detect_environment(tree(tmp_path, {
        "setup.py": "from setuptools import setup\nsetup(name='funcy')\n",
        "test_requirements.txt": "py==1.4.17\npytest==2.4.2\nwhatever==0.4.1\n",
        "tests/test_colls.py": "def test_a(): pass\n",
    }))
    assert env.setup[-2:] == ("python -m pip install -r test_requirements.txt",
                              "python -m pip install 'pytest>=4.6' 'py>=1.11'")


def test_newest_python_only_when_required(tmp_path: Path) -> None:
    env = detect_environment(tree(tmp_path, {
        "pyproject.toml": '[project]\nname = "x"\nrequires-python = ">=3.12"\n',
    }))
    assert env.python == "3.13"


def test_a_project_that_names_only_older_pythons_gets_the_nearest(tmp_path: Path) -> None:
    # astor 0.8.1: any Python 3 allowed, classifiers up to 3.8, tests that need 3.9 or older
    classifiers = "".join(f"    'Programming Language :: Python :: {v}',\n"
                          for v in ("2.7", "3.4", "3.7", "3.8"))
    setup_py = ("from setuptools import setup\nsetup(name='astor', python_requires="
                f"'>=2.7, !=3.0.*, !=3.1.*', classifiers=[\n{classifiers}])\n")
    assert detect_environment(tree(tmp_path / "a", {"setup.py": setup_py})).python == "3.9"
    # the sdist's metadata says it as well
    pkg_info = "Metadata-Version: 2.1\nName: x\nClassifier: Programming Language :: Python :: 3.9\n"
    plain = "from setuptools import setup\nsetup()\n"
    assert detect_environment(tree(tmp_path / "b", {"setup.py": plain, "PKG-INFO": pkg_info})
                              ).python == "3.9"
    # naming a newer one, or none, changes nothing
    newer = setup_py.replace("3.8'", "3.12'")
    assert detect_environment(tree(tmp_path / "c", {"setup.py": newer})).python == "3.11"
    assert detect_environment(tree(tmp_path / "d", {
        "pyproject.toml": '[project]\nname = "x"\nrequires-python = ">=3.12"\n'
                          'classifiers = ["Programming Language :: Python :: 3.8"]\n',
    })).python == "3.13"  # allowed ones only: the oldest above what it names


def test_overrides_replace_what_was_detected(tmp_path: Path) -> None:
    overrides = EnvOverrides(python="3.13", setup=("make install",), test_cmd="pytest -x -rA")
    env = detect_environment(tree(tmp_path, {"setup.py": "setup()\n"}), overrides)
    assert (env.python, env.setup, env.test_cmd) == ("3.13", ("make install",), "pytest -x -rA")
    assert env.log_parser == "pytest"


def test_has_tests(tmp_path: Path) -> None:
    assert not has_tests(tree(tmp_path / "a", {"pkg/core.py": "", "conftest.py": ""}))
    assert has_tests(tree(tmp_path / "b", {"pkg/core.py": "", "pkg/tests/test_core.py": ""}))


def test_detection_reads_a_commit_without_checking_it_out(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    tree(repo, {"setup.py": "setup()\n", "tests/test_a.py": ""})
    git = ["git", "-c", "user.name=a", "-c", "user.email=a@b"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(git + ["add", "-A"], cwd=repo, check=True)
    subprocess.run(git + ["commit", "-qm", "one"], cwd=repo, check=True)
    first = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True,
                           text=True, check=True).stdout.strip()
    (repo / "requirements-dev.txt").write_text("tox\n")
    subprocess.run(git + ["add", "-A"], cwd=repo, check=True)
    subprocess.run(git + ["commit", "-qm", "two"], cwd=repo, check=True)
    old = detect_environment(GitTree(repo, first))
    new = detect_environment(GitTree(repo, "HEAD"))
    assert "python -m pip install -r requirements-dev.txt" not in old.setup
    assert "python -m pip install -r requirements-dev.txt" in new.setup


def test_what_the_tests_import_and_nothing_declares_is_installed_on_a_guess(
        tmp_path: Path) -> None:
    """mccabe 0.7.0: test_mccabe.py needs hypothesis and hypothesmith, declared nowhere in the
    sdist; without them the module did not import, and every candidate was rejected."""
    from repogym.images.installed import pip_requests

    env = detect_environment(tree(tmp_path, {
        "setup.py": "from setuptools import setup\nsetup(name='mc', py_modules=['mc'])\n",
        "mc.py": "import ast\n",
        "test_mc.py": """\
            import os, unittest
            try:
                from StringIO import StringIO
            except ImportError:
                from io import StringIO
            try:  # astor 0.8.1: unittest2 installed made every test class fail under pytest
                import unittest2 as unittest
            except ImportError:
                import unittest
            try:
                import hypothesmith
                from hypothesis import given, settings
            except ImportError:
                hypothesmith = None
            import yaml
            import jaraco.path
            import pytest
            import mc
            from helpers import check
            from testing.support import ROOT  # a helper folder the sdist lacks
            import utils
            """,
        "helpers.py": "def check(): pass\n",
    }))
    guess = ('for p in PyYAML hypothesis hypothesmith jaraco.path; do python -m pip install -q '
             '"$p" || echo "repogym: $p (imported by the tests) did not install"; done')
    assert env.setup == ("python -m pip install -e .", guess,
                         "python -m pip install 'pytest>=4.6'")
    # a guess is not a requirement the build's check holds the image to
    assert [r["requirement"] for r in pip_requests(env.setup)["requirements"]] == [
        "pytest>=4.6"]


def test_test_files_discovery_would_miss_are_named_in_the_command(tmp_path: Path) -> None:
    """decorator 5.3: tests/test.py (a TestCase) beside tests/documentation.py (doctests in a
    docstring), no pytest configuration: pytest's discovery collects nothing, so the command
    adds the name of the file that defines tests to python_files, and a real run collects
    them."""
    root = tmp_path / "repo"
    files = {
        "pyproject.toml": '[project]\nname = "deco"\nversion = "1"\n',
        "src/deco.py": "def f():\n    return 1\n",
        "tests/test.py": "import unittest\n\n\nclass T(unittest.TestCase):\n"
                         "    def test_a(self):\n        pass\n",
        "tests/documentation.py": '"""\n>>> 1\n1\n"""\n\n\ndef helper():\n    pass\n',
    }
    env = detect_environment(tree(root, files))
    assert env.test_cmd == "python -m pytest -rA -o 'python_files=test_*.py *_test.py test.py'"
    run = subprocess.run([*shlex.split(env.test_cmd.replace("python", sys.executable, 1)),
                          "--collect-only", "-q", "-p", "no:cacheprovider"],
                         cwd=root, capture_output=True, text=True)
    assert "tests/test.py::T::test_a" in run.stdout, run.stdout
    # a file discovery finds, or a configuration that says where the tests are: left alone
    for extra in ({"tests/test_more.py": "def test_b():\n    pass\n"},
                  {"pytest.ini": "[pytest]\ntestpaths = tests\n"}):
        other = tmp_path / f"repo{len(extra)}-{sorted(extra)[0].replace('/', '_')}"
        assert detect_environment(tree(other, {**files, **extra})).test_cmd == \
            "python -m pytest -rA"


def test_tox_factor_dependencies_are_requirements(tmp_path: Path) -> None:
    """python-slugify 9.2's tox.ini: `unidecode: pip`, `anyascii: anyascii>=0.3.2` (a factor,
    then the requirement); pip was given "unidecode: pip" and every setup failed."""
    files = {
        "setup.py": "from setuptools import setup\nsetup(name='s')\n",
        "tox.ini": "[testenv]\ndeps =\n    pytest>=8\n    unidecode: pip\n"
                   "    py311,anyascii: anyascii>=0.3.2\n    !pypy: six\n"
                   "    pkg @ https://example.invalid/pkg.tar.gz\n",
        "tests/test_s.py": "def test_x():\n    pass\n",
    }
    setup = " ".join(detect_environment(tree(tmp_path, files)).setup)
    for requirement in ("'pytest>=8'", " pip", "'anyascii>=0.3.2'", " six",
                        "'pkg @ https://example.invalid/pkg.tar.gz'"):
        assert requirement in setup, setup
    assert ":" not in setup.replace("https:", ""), setup
