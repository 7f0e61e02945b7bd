"""Grading projects whose tests are not in a top-level ``tests/``, on a real engine.

Each project is built at test time: tests inside the package with ``testpaths`` (toolz 1.2.0's
layout, whose canaries went uncollected), a ``src/`` layout, ``testpaths`` in ``tox.ini``,
``python_files``/``python_functions`` settings, a plugin that ``addopts`` loads. The whole suite
runs (no test file known, as when a replication task's lists are derived) and the canaries must
be collected; then the test files are named (as when the task is graded) and gold must resolve
the task. Then a SWE-bench-style task: a repository-specific parser name (``parse_log_flask``),
``filterwarnings = error`` (flask's; pytest's cache warning crashed such runs) and an expected
id cut at a space, as SWE-bench's lists hold them.
"""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
from toy_repo import new_file

from repogym.envs.grading.grader import Grader, GraderConfig
from repogym.images.repository import ensure_image
from repogym.repo import snapshot_commit
from repogym.schema import Environment, Task
from repogym.tasks.validate import derive_lists

pytestmark = pytest.mark.docker

AREA = "def square(x):\n    return x + x\n"
FIXED = "def square(x):\n    return x * x\n"
TESTS = """\
    from shapes import square


    def {prefix}square():
        assert square(3) == 9


    def {prefix}square_zero():
        assert square(0) == 0
    """
INIT = "from shapes.area import square\n"

# layout: (files, the test file, the folder the canaries must go to when the whole suite runs)
LAYOUTS = {
    "tests_inside_the_package": ({
        "pyproject.toml": '[tool.pytest.ini_options]\ntestpaths = ["shapes"]\n'
                          'filterwarnings = ["error"]\n',
        "shapes/__init__.py": INIT, "shapes/area.py": AREA, "shapes/tests/__init__.py": "",
        "shapes/tests/test_area.py": TESTS.format(prefix="test_"),
    }, "shapes/tests/test_area.py", "shapes/tests"),
    "src_layout": ({
        "setup.cfg": "[tool:pytest]\npythonpath = src\n",
        "src/shapes/__init__.py": INIT, "src/shapes/area.py": AREA,
        "tests/unit/test_area.py": TESTS.format(prefix="test_"),
    }, "tests/unit/test_area.py", "tests/unit"),
    "testpaths_in_tox_ini": ({
        "tox.ini": "[tox]\nenvlist = py\n\n[pytest]\ntestpaths = spec\n",
        "shapes/__init__.py": INIT, "shapes/area.py": AREA,
        "spec/test_area.py": TESTS.format(prefix="test_"),
        "tests/test_stale.py": "def test_stale():\n    raise AssertionError\n",  # not collected
    }, "spec/test_area.py", "spec"),
    # pytest's own layout: addopts loads a plugin that declares an ini key the configuration
    # sets; the harness drops addopts, and under filterwarnings = error the key stopped the run
    "plugin_in_addopts": ({
        "pyproject.toml": '[tool.pytest.ini_options]\naddopts = "-p shapes.plugin"\n'
                          'shapes_examples = "examples"\nfilterwarnings = ["error"]\n'
                          'pythonpath = ["."]\ntestpaths = ["tests"]\n',
        "shapes/__init__.py": INIT, "shapes/area.py": AREA,
        "shapes/plugin.py": "def pytest_addoption(parser):\n"
                            "    parser.addini('shapes_examples', 'declared here')\n",
        "tests/test_area.py": TESTS.format(prefix="test_"),
    }, "tests/test_area.py", "tests"),
    "python_functions_setting": ({
        "pytest.ini": "[pytest]\npython_files = check_*.py\npython_functions = check_\n",
        "shapes/__init__.py": INIT, "shapes/area.py": AREA,
        "checks/check_area.py": TESTS.format(prefix="check_"),
    }, "checks/check_area.py", "checks"),
}


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def gold_patch(root: Path, path: str, new: str) -> str:
    """The diff that makes ``path`` read ``new`` (git's own, against the folder as it is)."""
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    old = (root / path).read_text()
    (root / path).write_text(new)
    diff = subprocess.run(["git", "-C", str(root), "diff"], capture_output=True, text=True,
                          check=True).stdout
    (root / path).write_text(old)
    shutil.rmtree(root / ".git")
    return diff


def project_task(root: Path, name: str, files: dict[str, str], **env: object) -> Task:
    write(root, files)
    area = next(p for p in files if p.endswith("area.py"))
    patch = gold_patch(root, area, FIXED)
    return Task(instance_id=f"layout__{name}", repo=f"layout/{name}",
                base_commit=snapshot_commit(root), problem_statement="square(3) is 6.",
                patch=patch, source=str(root), environment=Environment(timeout=60, **env))


@pytest.fixture(scope="module")
def grader() -> Grader:
    return Grader(GraderConfig(timeout=60, cleanup_async=False), seed=5)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_canaries_are_collected_where_the_project_keeps_its_tests(
        layout: str, grader: Grader, tmp_path: Path) -> None:
    files, test_file, folder = LAYOUTS[layout]
    prefix = "check_" if test_file.startswith("checks/") else "test_"
    task = project_task(tmp_path / layout, layout, files)
    image = ensure_image(task, progress=lambda _m: None).tag
    # the whole suite, as when a replication task's lists are derived
    whole = grader.grade(task, "", image)
    assert whole.valid, (whole.invalid_reasons, whole.canary_note, whole.log_tail)
    assert sorted(whole.canaries.values()) == ["FAILED", "PASSED"]
    assert {node.rsplit("/", 1)[0] for node in whole.canaries} == {folder}, whole.canaries
    assert whole.statuses[f"{test_file}::{prefix}square"] == "FAILED"
    assert not any("test_stale" in t for t in whole.statuses)  # testpaths kept the run narrow
    # the test files named, as when the task is graded
    graded = task.with_(FAIL_TO_PASS=(f"{test_file}::{prefix}square",),
                        PASS_TO_PASS=(f"{test_file}::{prefix}square_zero",))
    gold = grader.grade(graded, graded.patch, image)
    assert gold.resolved and gold.valid and not gold.flags, gold.invalid_reasons
    assert sorted(gold.canaries.values()) == ["FAILED", "PASSED"]


def test_a_package_with_tests_inside_yields_a_task(grader: Grader, tmp_path: Path) -> None:
    files, test_file, _ = LAYOUTS["tests_inside_the_package"]
    task = project_task(tmp_path / "inside", "inside", files)
    derived, reason = derive_lists(task, runs=1, grader=grader)
    assert derived is not None, reason
    assert derived.FAIL_TO_PASS == (f"{test_file}::test_square",)
    assert derived.PASS_TO_PASS == (f"{test_file}::test_square_zero",)


CLI_TESTS = '''\
import pytest

from app import locate


@pytest.mark.parametrize("spec", ['create_app2("foo", "bar")', 'create_app2("foo", "baz")',
                                  "plain"])
def test_locate_app(spec):
    assert locate(spec) == spec
'''
# the two spaced ids, as SWE-bench publishes them: cut at the first space, so one id for both
CUT = 'tests/test_cli.py::test_locate_app[create_app2("foo",'
PLAIN = "tests/test_cli.py::test_locate_app[plain]"


def test_a_repository_parser_and_cut_ids_get_the_pytest_treatment(
        grader: Grader, tmp_path: Path) -> None:
    root = write(tmp_path / "flaskish", {
        "pytest.ini": "[pytest]\ntestpaths = tests\npythonpath = .\nfilterwarnings =\n    error\n",
        "app.py": 'def locate(spec):\n    return spec.replace(" ", "")\n',
        "tests/test_other.py": "def test_other():\n    pass\n",
    })
    patch = gold_patch(root, "app.py", "def locate(spec):\n    return spec\n")
    half = patch.replace('+    return spec\n',
                         '+    return spec if "bar" in spec else spec.replace(" ", "")\n')
    task = Task(instance_id="flaskish__flaskish-1", repo="flaskish/flaskish",
                base_commit=snapshot_commit(root), problem_statement="locate drops spaces.",
                patch=patch, test_patch=new_file("tests/test_cli.py", CLI_TESTS),
                FAIL_TO_PASS=(CUT,), PASS_TO_PASS=(PLAIN, "tests/test_other.py::test_other"),
                source=str(root),
                environment=Environment(test_cmd="pytest -rA", log_parser="parse_log_flask",
                                        timeout=60))
    image = ensure_image(task, progress=lambda _m: None).tag
    gold = grader.grade(task, task.patch, image)
    assert gold.valid and gold.resolved, (gold.invalid_reasons, gold.log_tail)
    assert gold.fail_to_pass == {CUT: "PASSED"} and sorted(gold.canaries.values()) == [
        "FAILED", "PASSED"]
    assert gold.exit_code == 1  # the failing canary; no crash at exit
    empty = grader.grade(task, "", image)
    assert empty.valid and not empty.resolved and empty.fail_to_pass == {CUT: "FAILED"}
    # one of the two tests behind the cut id passes: the id does not
    partial = grader.grade(task, half, image)
    assert partial.valid and not partial.resolved and partial.fail_to_pass == {CUT: "FAILED"}
    assert sum(s == "PASSED" for t, s in partial.statuses.items() if "create_app2" in t) == 1


def test_an_installed_copy_that_shadows_the_repository_is_named(
        grader: Grader, tmp_path: Path) -> None:
    # the package is also copied into site-packages, and `pytest` (not `python -m pytest`)
    # does not put /testbed on sys.path: the tests import the copy, never the code under test
    files = {"shapes/__init__.py": INIT, "shapes/area.py": AREA,
             "tests/test_area.py": TESTS.format(prefix="test_")}
    copy = ('cp -r shapes "$(python -c \'import sysconfig; print(sysconfig.get_paths()'
            '["purelib"])\')/"')
    task = project_task(tmp_path / "shadowed", "shadowed", files, setup=(copy,),
                        test_cmd="pytest -rA")
    derived, reason = derive_lists(task, runs=1, grader=grader)
    assert derived is None
    assert reason.startswith("no test fails before the patch and passes after it: the tests "
                             "import shapes:/"), reason
    assert "installed copy shadows /testbed" in reason
