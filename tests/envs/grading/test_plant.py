"""Where the canaries go, read from a repository's own layout and pytest configuration (the
planter runs in the grading container; here it runs on folders built by each test)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from repogym.envs.grading import canary, plant


def repo(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    return root


def where(root: Path, args: list[str] | None = None, files: list[str] | None = None,
          added: list[str] | None = None) -> dict[str, Any]:
    request = json.loads(canary.request(args or ["-rA"], files or [], added or [],
                                        random.Random(3)))
    return plant.plan(request, str(root))


def test_tests_inside_the_package_with_testpaths(tmp_path: Path) -> None:
    # toolz 1.2.0: `testpaths = ["toolz"]`, tests in toolz/tests/ (a package)
    root = repo(tmp_path, {
        "pyproject.toml": '[tool.pytest.ini_options]\ntestpaths = ["toolz"]\n',
        "toolz/__init__.py": "", "toolz/tests/__init__.py": "",
        "toolz/tests/test_dicttoolz.py": "def test_a():\n    pass\n",
        "toolz/sandbox/tests/test_core.py": "def test_b():\n    pass\n",
    })
    got = where(root)
    assert got["path"].startswith("toolz/tests/test_") and not got["named"]
    assert "testpaths ['toolz']" in got["note"]


def test_src_layout_with_tests_at_the_root(tmp_path: Path) -> None:
    root = repo(tmp_path, {"src/pkg/__init__.py": "", "tests/unit/test_x.py": "",
                           "docs/conf.py": ""})
    got = where(root)
    assert got["path"].startswith("tests/unit/test_") and not got["named"]


def test_test_files_at_the_repository_root(tmp_path: Path) -> None:
    # a single-module project: shapes.py next to test_shapes.py, no configuration
    root = repo(tmp_path, {"shapes.py": "", "test_shapes.py": "def test_a():\n    pass\n"})
    got = where(root)
    assert "/" not in got["path"] and got["path"].startswith("test_") and not got["named"]


@pytest.mark.parametrize(("name", "text"), [
    ("pytest.ini", "[pytest]\ntestpaths = spec\n"),
    ("tox.ini", "[tox]\nenvlist = py\n[pytest]\ntestpaths = spec\n"),
    ("setup.cfg", "[tool:pytest]\ntestpaths =\n    spec\n"),
    ("pyproject.toml", '[tool.pytest]\nini_options.testpaths = "spec"\n'),  # iniconfig's form
])
def test_testpaths_from_any_configuration_file(tmp_path: Path, name: str, text: str) -> None:
    root = repo(tmp_path, {name: text, "spec/test_a.py": "", "tests/test_old.py": ""})
    got = where(root)
    assert got["path"].startswith("spec/test_") and not got["named"], got


def test_the_test_command_paths_come_before_testpaths(tmp_path: Path) -> None:
    root = repo(tmp_path, {"pytest.ini": "[pytest]\ntestpaths = spec\n", "spec/test_a.py": "",
                           "tests/fast/test_b.py": ""})
    got = where(root, ["-rA", "-k", "spec", "tests/fast"])
    assert got["path"].startswith("tests/fast/test_") and not got["named"]
    assert "selects tests (-k spec)" in got["note"]


def test_named_test_files_take_the_canary_next_to_them(tmp_path: Path) -> None:
    root = repo(tmp_path, {"pytest.ini": "[pytest]\ntestpaths = spec\n", "spec/test_a.py": ""})
    got = where(root, files=["pkg/checks/test_new.py"], added=["pkg/checks/test_new.py"])
    assert got["path"].startswith("pkg/checks/test_") and got["named"] and not got["extra"]


def test_python_files_and_functions_settings_name_the_canary(tmp_path: Path) -> None:
    root = repo(tmp_path, {
        "pytest.ini": "[pytest]\npython_files = check_*.py\npython_functions = check_\n",
        "checks/check_area.py": "def check_area():\n    pass\n",
    })
    got = where(root)
    assert got["path"].startswith("checks/check_") and got["path"].endswith(".py")
    assert got["passing"].startswith("check_") and got["failing"].startswith("check_")
    assert not got["named"]


def test_glob_patterns_in_python_functions(tmp_path: Path) -> None:
    root = repo(tmp_path, {"pytest.ini": "[pytest]\npython_functions = *_spec\n",
                           "tests/test_a.py": ""})
    got = where(root)
    assert got["passing"].endswith("_spec") and got["passing"].isidentifier()


def test_no_usable_function_pattern_makes_a_testcase(tmp_path: Path) -> None:
    root = repo(tmp_path, {"pytest.ini": "[pytest]\npython_functions = [xy]*\n",
                           "tests/test_a.py": ""})
    got = where(root)
    assert "::test_" in f"::{got['passing']}" and got["passing"].count("::") == 1
    assert got["passing"].startswith("Test")


def test_a_python_files_pattern_that_gives_no_name_names_the_canary(tmp_path: Path) -> None:
    root = repo(tmp_path, {"pytest.ini": "[pytest]\ntestpaths = spec\npython_files = [ab]*.py\n",
                           "spec/a_test.py": ""})
    got = where(root)
    # named on the command line together with the testpaths' test files: the run collects no
    # less (see the next test for why files, not the folder)
    assert got["named"] and got["extra"] == ["spec/a_test.py"] and got["path"].startswith("spec/")


def test_a_named_canary_is_collected_with_every_test_of_its_folder(tmp_path: Path) -> None:
    """voluptuous 0.16: testpaths voluptuous/tests, python_files tests.py. A canary named
    beside the folder that holds it was collected alone by pytest 8 and not at all by pytest
    9, so every candidate's run had no project test (0 of 5 kept, "no fail-to-pass test")."""
    root = repo(tmp_path, {
        "pyproject.toml": '[tool.pytest.ini_options]\npython_files = "tests.py"\n'
                          'testpaths = "pkg/tests"\n',
        "pkg/__init__.py": "", "pkg/tests/__init__.py": "",
        "pkg/tests/tests.py": "def test_a():\n    pass\n\n\ndef test_b():\n    pass\n",
        "pkg/tests/deep/__init__.py": "",
        "pkg/tests/deep/tests.py": "def test_c():\n    pass\n",
        "pkg/tests/.hidden/tests.py": "def test_hidden():\n    pass\n",
    })
    got = where(root)
    assert got["named"] and got["path"].startswith("pkg/tests/")
    (root / got["path"]).write_text(got["text"])
    run = subprocess.run([sys.executable, "-m", "pytest", "-o", "addopts=", "-p",
                          "no:cacheprovider", "--collect-only", "-q", *got["extra"],
                          got["path"]], cwd=root, capture_output=True, text=True)
    ids = {line for line in run.stdout.splitlines() if "::" in line}
    assert ids == {"pkg/tests/tests.py::test_a", "pkg/tests/tests.py::test_b",
                   "pkg/tests/deep/tests.py::test_c", f"{got['path']}::{got['passing']}",
                   f"{got['path']}::{got['failing']}"}, run.stdout


def test_testpaths_that_name_only_files(tmp_path: Path) -> None:
    root = repo(tmp_path, {"pytest.ini": "[pytest]\ntestpaths = test_all.py\n",
                           "test_all.py": ""})
    got = where(root)
    assert got["named"] and got["extra"] == ["test_all.py"]


def test_norecursedirs_and_hidden_folders_are_skipped(tmp_path: Path) -> None:
    root = repo(tmp_path, {"pytest.ini": "[pytest]\nnorecursedirs = legacy .*\n",
                           "legacy/test_a.py": "", ".hidden/test_b.py": "",
                           "deep/er/test_c.py": ""})
    assert where(root)["path"].startswith("deep/er/test_")


def test_the_file_name_is_used_nowhere_else(tmp_path: Path) -> None:
    request = json.loads(canary.request(["-rA"], [], [], random.Random(3)))
    words = request["words"]
    first = f"test_{words[0]}_{words[1]}.py"
    root = repo(tmp_path, {"tests/test_a.py": "", f"other/deep/{first}": ""})
    got = plant.plan(request, str(root))
    assert got["path"] != f"tests/{first}" and got["path"].startswith("tests/")


def test_the_config_is_found_from_the_named_paths_upwards(tmp_path: Path) -> None:
    root = repo(tmp_path, {"pytest.ini": "[pytest]\npython_functions = check\n",
                           "sub/tox.ini": "[pytest]\npython_functions = verify\n",
                           "sub/tests/test_a.py": ""})
    assert where(root, ["sub/tests"])["passing"].startswith("verify_")
    assert where(root, ["-c", "pytest.ini", "sub/tests"])["passing"].startswith("check_")
    assert where(root, ["-o", "python_functions=spec", "sub"])["passing"].startswith("spec_")


def test_toml_without_a_toml_parser(tmp_path: Path) -> None:
    text = textwrap.dedent("""\
        [project]
        name = "x"
        [tool.pytest.ini_options]
        addopts = "-ra"  # a comment
        testpaths = [
            "a",  # first
            'b',
        ]
        python_files = "check_*.py"
        [tool.other]
        testpaths = ["no"]
    """)
    tables = plant._toml_pytest_tables(text)
    assert tables["tool"]["pytest"]["ini_options"] == {
        "addopts": "-ra", "testpaths": ["a", "b"], "python_files": "check_*.py"}
    dotted = plant._toml_pytest_tables('[tool.pytest]\nini_options.testpaths = "testing"\n')
    assert dotted == {"tool": {"pytest": {"ini_options": {"testpaths": "testing"}}}}


def test_plant_writes_the_file_and_reports_it(tmp_path: Path) -> None:
    root = repo(tmp_path, {"tests/test_a.py": ""})
    request = json.loads(canary.request(["-rA"], [], [], random.Random(3)))
    got = plant.plant(request, str(root))
    text = (root / got["path"]).read_text()
    assert f"def {got['passing']}()" in text and f"def {got['failing']}()" in text
    planted = canary.read_planted(json.dumps(got))
    assert planted.canaries is not None and planted.canaries.args == []
    assert set(planted.canaries.ids.values()) == {"PASSED", "FAILED"}


def test_plugins_that_addopts_loads_are_named_again(tmp_path: Path) -> None:
    # pytest's own repository: `addopts = "-rfEX -p pytester --strict-markers"` declares the
    # `pytester_example_dir` key it sets; the harness drops addopts, and under
    # `filterwarnings = error` the unknown key stopped every run (exit status 3)
    root = repo(tmp_path, {
        "pyproject.toml": """\
            [tool.pytest.ini_options]
            addopts = "-rfEX -p myplug --strict-markers -p no:doctest -pother"
            myplug_dir = "x"
            filterwarnings = ["error"]
            pythonpath = ["."]
            """,
        "myplug.py": """\
            def pytest_addoption(parser):
                parser.addini("myplug_dir", "a key this plugin declares")
            """,
        "tests/test_a.py": "def test_a():\n    pass\n",
    })
    (root / "other.py").write_text("")
    request = json.loads(canary.request(["-rA"], [], [], random.Random(3)))
    planted = canary.read_planted(json.dumps(plant.plant(request, str(root))))
    assert planted.canaries is not None
    assert planted.canaries.plugin_args == ["-p", "myplug", "-p", "other"]
    run = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=",
           "tests"]
    bare = subprocess.run(run, cwd=root, capture_output=True, text=True)
    assert bare.returncode == 3 and "Unknown config option: myplug_dir" in bare.stdout
    full = subprocess.run([*run, *planted.canaries.plugin_args], cwd=root, capture_output=True,
                          text=True)
    assert "2 passed, 1 failed" in full.stdout.replace("1 failed, 2 passed", "2 passed, 1 failed")


def test_the_planter_reports_why_it_could_not_plant() -> None:
    planted = canary.read_planted('{"error": "no free file name for a canary in tests/"}')
    assert planted.canaries is None and "no free file name" in planted.error
    silent = canary.read_planted(None, "bash: python3: command not found\n")
    assert silent.canaries is None and "python3: command not found" in silent.error


def test_arguments_are_told_from_option_values() -> None:
    got = plant.split_args(["-rA", "-p", "no:cacheprovider", "-k", "a or b", "-x", "tests",
                            "--ignore=tests/slow", "-o", "python_files=x_*.py", "-n", "4",
                            "--tb=short", "pkg/test_a.py::test_b"])
    assert got["words"] == ["tests", "pkg/test_a.py::test_b"]
    assert got["ignore"] == ["tests/slow"] and got["overrides"] == {"python_files": "x_*.py"}


def test_the_planter_runs_on_python_3_9_syntax() -> None:
    import ast

    tree = ast.parse(canary.planter_source(), feature_version=(3, 9))
    assert tree.body
