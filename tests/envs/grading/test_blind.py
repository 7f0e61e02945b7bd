"""The disguise (hidden tests under other names, decoys under theirs) and the reporter's records,
without Docker: decoys are made from real test files and run by the host's pytest."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from repogym.envs.grading import canary, disguise, plant
from repogym.envs.grading.blind import Disguise
from repogym.envs.grading.reporter import Records, statuses

TESTS = textwrap.dedent("""\
    import unittest

    import pytest


    @pytest.mark.parametrize(("a", "b"), [(1, 2), (3, 4)])
    def test_hidden(a, b):
        assert a < b


    def test_other():
        assert True


    def test_one_line(): assert 1 == 1


    def test_returns_early():
        if True:
            return
        assert False


    @pytest.fixture
    def test_data():
        return 7


    def test_uses_a_fixture(test_data):
        assert test_data == 7


    class TestGroup:
        def test_method(self):
            assert [1] == [1]

        def test_not_hidden(self):
            pass


    class TestUnrelated:
        def test_z(self):
            pass


    class TestCaseStyle(unittest.TestCase):
        def test_u(self):
            self.assertEqual(1, 1)

        def test_v(self):
            pass
    """)
HIDDEN = ["tests/test_x.py::test_hidden[1-2]", "tests/test_x.py::test_one_line",
          "tests/test_x.py::test_returns_early", "tests/test_x.py::test_uses_a_fixture",
          "tests/test_x.py::TestGroup::test_method", "tests/test_x.py::TestCaseStyle::test_u"]


def run_pytest(folder: Path, *args: str) -> dict[str, str]:
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA",
                           "-o", "addopts=", *args], cwd=folder, capture_output=True, text=True)
    found = {}
    for line in proc.stdout.splitlines():
        status, _, rest = line.partition(" ")
        if status in ("PASSED", "FAILED", "ERROR", "SKIPPED"):
            found[rest.split(" - ")[0]] = status
    return found


def test_a_decoy_runs_each_hidden_test_then_fails_and_drops_the_others(tmp_path: Path) -> None:
    hidden = disguise.hidden_by_file(HIDDEN)["tests/test_x.py"]
    text, expected = disguise.decoy_text(TESTS, hidden, ["test"], ["Test"])
    assert expected == ["TestCaseStyle::test_u", "TestGroup::test_method", "test_hidden",
                        "test_one_line", "test_returns_early", "test_uses_a_fixture"]
    # every line keeps its number, so tracebacks and what a test reads of its source agree
    assert text.splitlines()[: len(TESTS.splitlines())][6] == TESTS.splitlines()[6]
    (tmp_path / "test_x.py").write_text(text)
    assert run_pytest(tmp_path, "test_x.py") == {
        "test_x.py::test_hidden[1-2]": "FAILED", "test_x.py::test_hidden[3-4]": "FAILED",
        "test_x.py::test_one_line": "FAILED", "test_x.py::test_returns_early": "FAILED",
        "test_x.py::test_uses_a_fixture": "FAILED", "test_x.py::TestGroup::test_method": "FAILED",
        "test_x.py::TestCaseStyle::test_u": "FAILED",
    }
    # the original passes everything: the decoy fails only because of what was added
    (tmp_path / "test_x.py").write_text(TESTS)
    assert set(run_pytest(tmp_path, "test_x.py").values()) == {"PASSED"}


def test_a_decoy_keeps_the_test_s_own_code(tmp_path: Path) -> None:
    # a forgery that recognises the hidden tests by the names their code uses must recognise
    # the decoys too: no wrapper stands between pytest and the test's own function
    text, _ = disguise.decoy_text(TESTS, disguise.hidden_by_file(HIDDEN)["tests/test_x.py"],
                                  ["test"], ["Test"])
    namespace: dict[str, Any] = {"__name__": "test_x"}
    exec(compile(text, "test_x.py", "exec"), namespace)
    assert "a" in namespace["test_hidden"].__code__.co_varnames
    assert not hasattr(namespace["test_hidden"], "__wrapped__")
    # a class of no hidden test stays (other test files may import it), without its tests
    assert "test_other" not in namespace and namespace["TestUnrelated"].test_z is None


def git_repo(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    return root


def test_the_container_side_renames_links_data_and_stores_decoys(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = git_repo(tmp_path / "repo", {
        "pyproject.toml": "[tool.pytest.ini_options]\n", "pkg/__init__.py": "",
        "tests/test_x.py": TESTS, "tests/test_y.py": "def test_y():\n    pass\n",
        "tests/test_x/expected.txt": "data named after the module\n",
    })
    monkeypatch.setattr(disguise, "DECOY_DIR", str(tmp_path / "decoys"))
    request = json.loads(canary.request(
        ["-rA"], ["tests/test_x.py", "tests/test_y.py"], [], random.Random(1),
        {"disguise": True, "hidden": HIDDEN, "seed": 7}))
    planted = plant.plant(request, str(root))
    report = plant.disguise_tests(request, planted, str(root))
    got = Disguise.read(report)
    assert set(got.renamed) == {"tests/test_x.py", "tests/test_y.py"}
    for old, new in got.renamed.items():
        assert new.startswith("tests/test_") and new != old and new != planted["path"]
        assert (root / new).read_text() == (root / old).read_text()  # a copy, untouched
    stem = Path(got.renamed["tests/test_x.py"]).stem
    assert (root / "tests" / stem / "expected.txt").exists()  # the data follows the new name
    assert set(got.decoys) == {"tests/test_x.py"} and Path(got.decoys["tests/test_x.py"]).exists()
    assert "test_hidden" in got.expected["tests/test_x.py"]
    with pytest.raises(ValueError, match="could not be disguised: boom"):
        Disguise.read({"error": "boom"})


def test_results_map_back_and_strays_and_decoys_are_caught() -> None:
    d = Disguise({"tests/test_x.py": "tests/test_a_b.py"}, {"tests/test_x.py": "/s/0.py"},
                 {"tests/test_x.py": ("test_hidden", "TestGroup::test_method")})
    args = d.run_args(["tests/test_x.py", "tests/test_y.py"], ["tests/test_c_d.py"],
                      random.Random(0))
    assert args[0] == "--ignore=tests/test_x.py" and "tests/test_x.py" not in args[1:]
    assert set(args[1:]) == {"tests/test_a_b.py", "tests/test_y.py", "tests/test_c_d.py"}
    # ids cut at a space keep their cut: only the file part changes
    raw = {"tests/test_a_b.py::test_hidden[a": "PASSED", "tests/test_y.py::test_y": "FAILED"}
    assert d.unmask(raw) == {"tests/test_x.py::test_hidden[a": "PASSED",
                             "tests/test_y.py::test_y": "FAILED"}
    forged = {"tests/test_x.py::test_hidden[1-2]": "PASSED"}
    assert d.strays(forged, []) == ["tests/test_x.py::test_hidden[1-2]"]
    assert d.strays(forged, ["tests/test_x.py"]) == []  # the command names it itself
    assert d.decoy_problems({"tests/test_x.py::test_hidden[1-2]": "FAILED",
                             "tests/test_x.py::TestGroup::test_method": "ERROR"}, []) == []
    problems = d.decoy_problems({"tests/test_x.py::test_hidden[1-2]": "PASSED"}, [])
    assert problems == ["decoy tests/test_x.py::test_hidden[1-2] passed",
                        "decoy tests/test_x.py::TestGroup::test_method was not reported"]
    assert d.decoy_problems({}, ["tests/test_x.py"]) == []  # the file failed to import


def test_records_give_statuses_like_junit() -> None:
    reports = [
        {"id": "t.py::a", "w": "call", "o": "passed"},
        {"id": "t.py::b", "w": "call", "o": "passed"}, {"id": "t.py::b", "w": "teardown",
                                                         "o": "failed"},
        {"id": "t.py::c", "w": "setup", "o": "failed"},
        {"id": "t.py::d", "w": "setup", "o": "skipped"},
        {"id": "t.py::e", "w": "call", "o": "skipped", "x": True},
        {"id": "t.py::f", "w": "call", "o": "failed"},
    ]
    assert statuses(reports) == {"t.py::a": "PASSED", "t.py::b": "ERROR", "t.py::c": "ERROR",
                                 "t.py::d": "SKIPPED", "t.py::e": "XFAIL", "t.py::f": "FAILED"}
    text = "\n".join([json.dumps({"k": "r", **r}) for r in reports[:1]]
                     + [json.dumps({"k": "eq", "id": "t.py::a", "t": "pkg.Any"}),
                        json.dumps({"k": "c", "id": "t2.py"}),
                        json.dumps({"end": True, "bad": 2})])
    records = Records.parse(text)
    assert records.statuses == {"t.py::a": "PASSED", "t2.py": "ERROR"}
    assert records.always_equal == {"t.py::a": "pkg.Any"}
    assert records.collection_errors == ["t2.py"]
    assert records.problems() == ["2 records of the test run did not verify (forged or "
                                  "written to the harness's pipe by the code under test)"]
    assert Records.parse("").problems() == ["the collector did not finish"]


def test_the_equality_check_flags_only_insane_package_types(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from repogym.envs.grading import harness_plugin as plugin

    class AlwaysEqual:
        def __eq__(self, other: object) -> bool:
            return True

    class EqualToCommonTypes:
        def __eq__(self, other: object) -> bool:
            return isinstance(other, (int, str, list))

    class Sane:
        def __init__(self, v: int) -> None:
            self.v = v

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Sane) and other.v == self.v

    assert plugin._always_equal(AlwaysEqual()) and plugin._always_equal(EqualToCommonTypes())
    assert not plugin._always_equal(Sane(1)) and not plugin._always_equal(5)
    # what is checked: the package's objects, in the containers a value holds too
    monkeypatch.setattr(plugin, "_in_package", lambda cls: cls in (AlwaysEqual, Sane))
    assert [type(x).__name__ for x in plugin._suspects([AlwaysEqual(), {"k": Sane(2)}])] == [
        "AlwaysEqual", "Sane"]


@pytest.mark.parametrize("hook", [True, False])
def test_the_pass_hook_is_implemented_only_when_the_run_turns_it_on(tmp_path: Path,
                                                                    hook: bool) -> None:
    # a plugin that implements pytest_assertion_pass changes what pytest's own tests of the
    # hook see; a task validated without the hook must run as if no plugin had it
    from repogym.envs.grading import harness_plugin

    plugins = tmp_path / "py"
    plugins.mkdir()
    (plugins / "_repogym_harness.py").write_text(Path(harness_plugin.__file__).read_text())
    (tmp_path / "test_it.py").write_text(
        "def test_it(request):\n"
        "    hook = request.config.pluginmanager.hook.pytest_assertion_pass\n"
        "    print('IMPLS', len(hook.get_hookimpls()))\n")
    options = ["-o", "enable_assertion_pass_hook=true"] if hook else []
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-s", "-q", "-p", "no:cacheprovider",
         "-p", "_repogym_harness", *options, "test_it.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={"PYTHONPATH": str(plugins), "PATH": "/usr/bin:/bin"})
    assert "1 passed" in out.stdout, out.stdout + out.stderr
    assert f"IMPLS {1 if hook else 0}" in out.stdout


RETURNS = textwrap.dedent("""\
    def helper():
        return 41


    def test_hidden():
        value = helper() + 1
        if value:
            return value, "x"
        return


    def test_other():
        assert helper() == 41
    """)


def test_a_decoy_is_the_original_where_the_test_run_s_variable_is_set(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the decoys stand at their paths while the test run goes on: a module of the test run that
    # imports one as a helper must get the original file
    off = ("PYTEST_RG_TEST", "on")
    text, expected = disguise.decoy_text(RETURNS, {(): {"test_hidden"}}, ["test"], ["Test"], off)
    assert expected == ["test_hidden"]
    assert text.splitlines()[7] == '        return _repogym_fail((value, "x"))'
    (tmp_path / "test_r.py").write_text(text)
    assert run_pytest(tmp_path, "test_r.py") == {"test_r.py::test_hidden": "FAILED"}
    monkeypatch.setenv(*off)
    assert run_pytest(tmp_path, "test_r.py") == {"test_r.py::test_hidden": "PASSED",
                                                 "test_r.py::test_other": "PASSED"}
    namespace: dict[str, Any] = {}
    exec(compile(text, "test_r.py", "exec"), namespace)
    assert namespace["test_hidden"]() == (42, "x") and "test_other" in namespace
    monkeypatch.setenv(off[0], "another value")
    with pytest.raises(AssertionError):
        exec(compile(text, "test_r.py", "exec"), namespace)
        namespace["test_hidden"]()


def test_the_decoy_run_keeps_the_named_cases_of_each_hidden_function(tmp_path: Path) -> None:
    # a drawn PASS_TO_PASS test that is one case of a parametrized function: the decoy run runs
    # that case, not the dozen others; a function none of whose cases is found runs whole
    plugin = Path(disguise.__file__).with_name("harness_plugin.py")
    (tmp_path / "_repogym_harness.py").write_text(plugin.read_text())
    (tmp_path / "test_p.py").write_text(textwrap.dedent("""\
        import pytest


        @pytest.mark.parametrize("n", [1, 2, 3])
        def test_a(n):
            pass


        @pytest.mark.parametrize("w", ["x y", "z"])
        def test_b(w):
            pass


        def test_c():
            pass
        """))
    ids = ["test_p.py::test_a[2]", "test_p.py::test_b[x", "test_p.py::test_c"]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", "-p", "_repogym_harness",
         "test_p.py"], cwd=tmp_path, capture_output=True, text=True,
        env={**__import__("os").environ, "PYTHONPATH": str(tmp_path),
             "REPOGYM_DECOY_IDS": json.dumps(ids)})
    passed = sorted(line.split(" ", 1)[1] for line in proc.stdout.splitlines()
                    if line.startswith("PASSED"))
    assert passed == ["test_p.py::test_a[2]", "test_p.py::test_b[x y]", "test_p.py::test_b[z]",
                      "test_p.py::test_c"], proc.stdout


def test_hidden_files_get_free_names_when_python_files_accepts_one_taken_name(
        tmp_path: Path) -> None:
    """voluptuous 0.16: ``python_files = tests.py``, and tests.py is its test file. The run
    names the disguised files, so they take ``test_<word>_<word>.py`` names; every candidate
    was rejected with "no free file name"."""
    (tmp_path / "pkg" / "tests").mkdir(parents=True)
    (tmp_path / "pkg" / "tests" / "tests.py").write_text("")
    taken: set[str] = set()
    names = [disguise.new_name(random.Random(1), ["a", "b", "c", "d"], "pkg/tests",
                               ["tests.py"], taken, str(tmp_path), plant.file_name)
             for _ in range(3)]
    assert len(set(names)) == 3 and all(n.startswith("test_") for n in names), names


INHERITED = textwrap.dedent("""\
    import unittest

    from helpers import Elsewhere


    class Base(object):
        def test_same_file(self):
            self.assertEqual(1, 1)

        def test_kept(self):
            pass


    class DictTests(Base, unittest.TestCase):
        pass


    class ChildTests(DictTests):
        pass


    class OtherTests(Elsewhere, unittest.TestCase):
        pass


    class MadeTests(unittest.TestCase):
        pass


    for case in ("one", "two"):
        setattr(MadeTests, "test_" + case, lambda self: None)
    """)


def test_a_decoy_fails_the_hidden_tests_a_class_inherits(tmp_path: Path) -> None:
    """addict 2.4: DictTests and ChildDictTests inherit every test from a base class of the
    same file (cachetools: from a mixin in tests/__init__.py; uritemplate 4.2: its tests are
    set on the class from data). Those decoys passed, the decoy run exited 0, and every grade
    was invalid: no candidate was kept."""
    hidden = disguise.hidden_by_file([
        "test_x.py::DictTests::test_same_file", "test_x.py::ChildTests::test_same_file",
        "test_x.py::OtherTests::test_elsewhere", "test_x.py::MadeTests::test_one"]
                                      )["test_x.py"]
    text, expected = disguise.decoy_text(INHERITED, hidden, ["test"], ["Test"])
    assert expected == ["ChildTests::test_same_file", "DictTests::test_same_file",
                        "MadeTests::test_one", "OtherTests::test_elsewhere"]
    (tmp_path / "helpers.py").write_text(
        "class Elsewhere(object):\n    def test_elsewhere(self):\n        pass\n")
    (tmp_path / "test_x.py").write_text(text)
    assert run_pytest(tmp_path, "test_x.py") == {
        "test_x.py::DictTests::test_same_file": "FAILED",
        "test_x.py::ChildTests::test_same_file": "FAILED",
        "test_x.py::OtherTests::test_elsewhere": "FAILED",
        "test_x.py::MadeTests::test_one": "FAILED"}
    (tmp_path / "test_x.py").write_text(INHERITED)
    assert set(run_pytest(tmp_path, "test_x.py").values()) == {"PASSED"}


def test_decoys_across_files_keep_what_other_test_files_import_and_inherit(
        tmp_path: Path) -> None:
    """itsdangerous 2.2: test_url_safe.py imports TestSerializer from test_serializer.py, and
    TestTimestampSigner (test_timed.py) inherits its tests from TestSigner (test_signer.py).
    With both files decoys, test_serializer's decoy deleted the class (test_url_safe.py
    failed to import) and test_signer's dropped the methods a subclass elsewhere inherits as
    its hidden tests (never reported): the decoy run's check failed the gold patch."""
    base = textwrap.dedent("""\
        class TestSigner:
            def test_own(self):
                pass

            def test_shared(self):
                pass


        class TestLonely:
            def test_alone(self):
                pass
        """)
    sub = textwrap.dedent("""\
        from test_base import TestLonely, TestSigner


        class TestTimed(TestSigner):
            def test_mine(self):
                pass
        """)
    # pytest collects an imported test class in the importing file too
    ids = ["test_base.py::TestSigner::test_own", "test_sub.py::TestTimed::test_shared",
           "test_sub.py::TestTimed::test_mine", "test_sub.py::TestLonely::test_alone"]
    hidden = disguise.hidden_by_file(ids)
    for name, text in (("test_base.py", base), ("test_sub.py", sub)):
        decoy, expected = disguise.decoy_text(text, hidden[name], ["test"], ["Test"])
        assert sorted(f"{name}::{e}" for e in expected) == sorted(
            i for i in ids if i.startswith(name))
        (tmp_path / name).write_text(decoy)
    assert run_pytest(tmp_path, "test_base.py", "test_sub.py") == {
        "test_base.py::TestSigner::test_own": "FAILED",
        "test_sub.py::TestTimed::test_shared": "FAILED",
        "test_sub.py::TestTimed::test_mine": "FAILED",
        "test_sub.py::TestLonely::test_alone": "FAILED"}
