"""The two result sources and how they are compared."""

import subprocess
import sys
from pathlib import Path

from swebench.harness.log_parsers import PARSER_REGISTRY

from repogym.envs.grading.results import (
    disagreements,
    log_keys,
    match_cut_ids,
    parse_junit,
    parse_log,
    resolve_cut_ids,
    worst,
)
from repogym.envs.grading.testcmd import pytest_args, reads_pytest_output, runs_pytest
from repogym.schema import Environment

JUNIT = """<?xml version="1.0"?><testsuites><testsuite>
<testcase classname="tests.test_a" file="tests/test_a.py" name="test_ok"/>
<testcase classname="tests.test_a.TestK" file="tests/test_a.py" name="test_m"><failure/></testcase>
<testcase classname="tests.test_a" file="tests/test_a.py" name="test_p[a b]"/>
<testcase classname="tests.test_a" file="tests/test_a.py" name="test_s"><skipped/></testcase>
</testsuite></testsuites>"""

LOG = """PASSED tests/test_a.py::test_ok
FAILED tests/test_a.py::TestK::test_m - assert 1 == 2
PASSED tests/test_a.py::test_p[a b]
SKIPPED [1] tests/test_a.py:9: no reason
"""


def test_junit_ids_match_pytest_node_ids() -> None:
    assert parse_junit(JUNIT) == {
        "tests/test_a.py::test_ok": "PASSED",
        "tests/test_a.py::TestK::test_m": "FAILED",
        "tests/test_a.py::test_p[a b]": "PASSED",
        "tests/test_a.py::test_s": "SKIPPED",
    }


def test_sources_agree_including_ids_with_spaces() -> None:
    junit, log = parse_junit(JUNIT), parse_log(LOG, "pytest")
    ids = ["tests/test_a.py::test_ok", "tests/test_a.py::TestK::test_m",
           "tests/test_a.py::test_p[a b]"]
    assert disagreements(junit, log, ids) == []


def test_a_forged_log_line_disagrees() -> None:
    junit = parse_junit(JUNIT)
    log = parse_log(LOG.replace("FAILED tests/test_a.py::TestK::test_m - assert 1 == 2",
                                "PASSED tests/test_a.py::TestK::test_m"), "pytest")
    assert disagreements(junit, log, ["tests/test_a.py::TestK::test_m"]) == [
        "tests/test_a.py::TestK::test_m"]


# SWE-bench's published lists hold ids as swebench's log parser cuts them (at a space)
CUT = 'tests/test_cli.py::test_locate_app[cliapp.factory-create_app2("foo",'
FULL = 'tests/test_cli.py::test_locate_app[cliapp.factory-create_app2("foo", "bar")]'
TWIN = 'tests/test_cli.py::test_locate_app[cliapp.factory-create_app2("foo", "baz")]'


def test_a_cut_id_stands_for_the_whole_id_it_was_cut_from() -> None:
    junit = {FULL: "PASSED", "tests/test_cli.py::test_other": "PASSED"}
    groups = match_cut_ids([CUT, "tests/test_cli.py::test_other"], junit, "parse_log_flask")
    assert groups == {CUT: [FULL]}
    view = resolve_cut_ids(junit, groups)
    assert view[CUT] == "PASSED" and view[FULL] == "PASSED"
    log = parse_log(f"PASSED {FULL}\n", "parse_log_flask")
    assert log == {CUT: "PASSED"}
    assert disagreements(view, log, [CUT, FULL], "parse_log_flask") == []


def test_ids_that_share_a_cut_id_pass_only_together() -> None:
    # swebench's parser keeps the last summary line of an id: a failure (printed after the
    # passes) wins, so the cut id passes only when every test behind it passes
    junit = {FULL: "PASSED", TWIN: "FAILED"}
    groups = match_cut_ids([CUT], junit, "parse_log_pytest")
    assert groups == {CUT: sorted([FULL, TWIN])}
    assert resolve_cut_ids(junit, groups)[CUT] == "FAILED"
    log = parse_log(f"PASSED {FULL}\nFAILED {TWIN} - assert 0\n", "parse_log_pytest")
    assert log[CUT] == "FAILED"
    assert disagreements(resolve_cut_ids(junit, groups), log, [CUT], "parse_log_pytest") == []
    assert worst(["PASSED", "XFAIL", "SKIPPED"]) == "XFAIL"
    assert worst(["PASSED", "PASSED"]) == "PASSED"


def test_a_list_cut_at_a_space_is_read_where_the_parser_keeps_whole_ids() -> None:
    """sphinx-doc__sphinx-8713: SWE-bench's lists were made by parsers that cut ids at a
    space; swebench 5's parser for Sphinx keeps the whole id. The listed cut id still stands for
    the test it was cut from, in JUnit's statuses and in the log's alike."""
    full = "tests/t.py::T::test_escape[x, y, z-x, y, z]"
    cut = "tests/t.py::T::test_escape[x,"
    log = parse_log(f"PASSED {full}\n", "parse_log_sphinx")
    assert log == {full: "PASSED"}  # the parser reads the whole id
    assert cut in log_keys(full, "parse_log_sphinx")
    junit = {full: "PASSED"}
    view = resolve_cut_ids(junit, match_cut_ids([cut], junit, "parse_log_sphinx"))
    log_view = resolve_cut_ids(log, match_cut_ids([cut], log, "parse_log_sphinx"))
    assert view[cut] == log_view[cut] == "PASSED"
    assert disagreements(view, log_view, [cut], "parse_log_sphinx") == []
    # a failure behind the cut id fails it in both
    log = parse_log(f"FAILED {full} - assert 0\n", "parse_log_sphinx")
    assert resolve_cut_ids(log, match_cut_ids([cut], log, "parse_log_sphinx"))[cut] == "FAILED"


def test_ids_as_the_options_parser_rewrites_them() -> None:
    # requests' parser shortens a path parameter to its last part
    full = "tests/test_utils.py::test_x[/usr/lib/python3]"
    cut = "tests/test_utils.py::test_x[/python3]"
    assert cut in log_keys(full, "parse_log_requests")
    assert match_cut_ids([cut], {full: "PASSED"}, "parse_log_requests") == {cut: [full]}


def test_a_source_that_lacks_a_test_claims_no_pass() -> None:
    junit = {"t.py::a": "SKIPPED", "t.py::b": "PASSED"}
    assert disagreements(junit, {}, ["t.py::a"]) == []
    assert disagreements(junit, {}, ["t.py::b"]) == ["t.py::b"]
    assert disagreements({}, {"t.py::b": "PASSED"}, ["t.py::b"]) == ["t.py::b"]


def test_an_unexpected_pass_is_no_pass_and_no_source_contradicts_it() -> None:
    """sqlparse 0.6.1: the reporter called a passing xfail test PASSED, the log's parser had no
    line for it, and every grade of a task listing it was invalid."""
    from repogym.envs.grading.reporter import status_of, statuses

    xpass = {"id": "t.py::x", "w": "call", "o": "passed", "x": True}
    assert status_of(xpass) == "XPASS"
    assert status_of({**xpass, "x": False}) == "PASSED"
    teardown = {"id": "t.py::x", "w": "teardown", "o": "failed"}
    assert statuses([xpass, teardown]) == {"t.py::x": "ERROR"}
    # JUnit writes it as a pass, swebench's parser leaves it out: neither disagrees
    assert disagreements({"t.py::x": "XPASS"}, {"t.py::x": "PASSED"}, ["t.py::x"]) == []
    assert disagreements({"t.py::x": "XPASS"}, {}, ["t.py::x"]) == []
    # a pass the log does not hold still disagrees
    assert disagreements({"t.py::x": "PASSED"}, {}, ["t.py::x"]) == ["t.py::x"]


def test_a_test_patch_of_data_alone_names_no_file() -> None:
    """jmespath's history: commits whose tests are cases in ``tests/compliance/*.json``. Named,
    the JSON file was all pytest was given ("collected 0 items"); SWE-bench leaves such files
    out of the test directives. The listed tests' modules are named once there are lists."""
    from repogym.envs.grading.testcmd import test_files
    from repogym.schema import Task

    data = ("diff --git a/tests/compliance/filters.json b/tests/compliance/filters.json\n"
            "--- a/tests/compliance/filters.json\n+++ b/tests/compliance/filters.json\n"
            "@@ -1 +1 @@\n-[]\n+[1]\n")
    task = Task(instance_id="j", repo="j", base_commit="0" * 40, problem_statement="",
                patch="", test_patch=data)
    assert test_files(task) == []
    listed = task.with_(FAIL_TO_PASS=("tests/test_compliance.py::test_case[1]",))
    assert test_files(listed) == ["tests/test_compliance.py"]
    doctest = data.replace("compliance/filters.json", "guide.rst")
    assert test_files(task.with_(test_patch=doctest)) == ["tests/guide.rst"]


def test_a_test_file_the_test_patch_deletes_is_not_named() -> None:
    """blinker's history: a commit that removes tests/_test_async.py; named, pytest stopped
    ("file or directory not found", exit status 4) and the candidate was rejected."""
    from repogym.envs.grading.testcmd import test_files
    from repogym.schema import Task

    patch = ("diff --git a/tests/_test_async.py b/tests/_test_async.py\n"
             "deleted file mode 100644\n--- a/tests/_test_async.py\n+++ /dev/null\n"
             "@@ -1 +0,0 @@\n-import asyncio\n"
             "diff --git a/tests/test_signals.py b/tests/test_signals.py\n"
             "--- a/tests/test_signals.py\n+++ b/tests/test_signals.py\n"
             "@@ -1 +1 @@\n-a = 1\n+a = 2\n")
    task = Task(instance_id="b", repo="b", base_commit="0" * 40, problem_statement="",
                patch="", test_patch=patch)
    assert test_files(task) == ["tests/test_signals.py"]


def test_parsers_are_pytest_by_what_they_read() -> None:
    pytest_like = {k for k in PARSER_REGISTRY if reads_pytest_output(k)}
    assert {"parse_log_pytest", "parse_log_flask", "parse_log_requests", "parse_log_astropy",
            "parse_log_matplotlib", "parse_log_seaborn"} <= pytest_like
    assert reads_pytest_output("pytest") and reads_pytest_output("pytest_v2")
    assert not {"parse_log_django", "parse_log_sympy", "parse_log_jest", "parse_log_gotest",
                "parse_log_cargo"} & pytest_like


def test_a_run_is_pytest_when_its_command_runs_pytest() -> None:
    assert pytest_args("python -m pytest -rA") == ["-rA"]
    assert pytest_args("pytest --no-header -rA -p no:cacheprovider") == [
        "--no-header", "-rA", "-p", "no:cacheprovider"]
    assert pytest_args("cd repo && PYTHONWARNINGS=ignore py.test tests") == ["tests"]
    assert pytest_args("tox --current-env -epy39 -v --") == []
    assert pytest_args("./tests/runtests.py --verbosity 2") is None
    flask = Environment(test_cmd="pytest -rA", log_parser="parse_log_flask")
    assert runs_pytest(flask)
    assert not runs_pytest(Environment(test_cmd="bin/test -C", log_parser="parse_log_sympy"))
    assert not runs_pytest(Environment(test_cmd="bin/test -C", log_parser="pytest"))
    assert pytest_args("env PYTHONHASHSEED=0 python -m pytest -rA") == ["-rA"]
    assert pytest_args("timeout 600 coverage run -m pytest -x") == ["-x"]
    assert pytest_args("pytest -x tests || true") == ["-x", "tests"]


def test_junit_ids_of_inherited_methods_are_the_node_ids(tmp_path: Path) -> None:
    """A method a test class inherits is written in another file, which JUnit's ``file``
    names (cachetools: every cache's tests come from a mixin in tests/__init__.py); the ids
    are pytest's node ids all the same, with and without another source to match."""
    (tmp_path / "tests" / "unit").mkdir(parents=True)
    (tmp_path / "tests" / "__init__.py").write_text(
        "class Mixin:\n    def test_clear(self):\n        assert True\n\n"
        "def test_shared():\n    assert False\n")
    (tmp_path / "tests" / "unit" / "__init__.py").write_text("")
    (tmp_path / "tests" / "unit" / "test_lru.py").write_text(
        "import unittest\nfrom tests import Mixin, test_shared\n\n\n"
        "class LRUTest(Mixin, unittest.TestCase):\n    def test_own(self):\n        pass\n")
    xml = tmp_path / "junit.xml"
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA",
                          f"--junitxml={xml}", "-o", "junit_family=xunit1", "tests"],
                         cwd=tmp_path, capture_output=True, text=True)
    log = parse_log(run.stdout, "pytest")
    assert set(log) == {"tests/unit/test_lru.py::LRUTest::test_clear",
                        "tests/unit/test_lru.py::LRUTest::test_own",
                        "tests/unit/test_lru.py::test_shared"}, run.stdout
    assert parse_junit(xml.read_text(), log) == log
    assert parse_junit(xml.read_text()) == log
