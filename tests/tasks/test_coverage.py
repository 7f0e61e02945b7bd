"""Which tests a change can reach: changed functions, the map, and the plugin that makes it
(run here with the host's pytest on a small project, as it runs in a container)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from repogym.tasks.coverage import Change, CoverageMap, changed_functions, combine
from repogym.tasks.sources.statements import public_name

LIB = textwrap.dedent('''\
    """A small library."""
    import functools

    LIMIT = 10


    def helper(x):
        return x + 1


    def double(x):
        """Twice x."""
        return 2 * helper(x) - 2


    class Box:
        size = 3

        def __init__(self, items):
            self.items = list(items)

        @property
        def total(self):
            def add(a, b):
                return a + b
            return functools.reduce(add, self.items, 0)


    TABLE = [helper(i) for i in range(3)]
    ''')


def place(text: str, name: str) -> tuple[str, int]:
    """Where ``def name`` (or its first decorator) starts in LIB."""
    lines = text.splitlines()
    number = next(i for i, line in enumerate(lines, 1) if line.strip().startswith(f"def {name}("))
    while lines[number - 2].strip().startswith("@"):
        number -= 1
    return "pkg/lib.py", number


def test_a_change_in_a_body_names_its_function() -> None:
    change = changed_functions("pkg/lib.py", LIB, LIB.replace("2 * helper(x) - 2",
                                                              "2 * helper(x) - 1"))
    assert change == Change(functions=frozenset({place(LIB, "double")}))


def test_a_method_behind_a_decorator_starts_at_the_decorator() -> None:
    change = changed_functions("pkg/lib.py", LIB, LIB.replace("self.items, 0)",
                                                              "self.items, 1)"))
    decorator = LIB.splitlines().index("    @property") + 1
    assert change.functions == {("pkg/lib.py", decorator), ("pkg/lib.py", decorator + 1)}
    assert place(LIB, "total") == ("pkg/lib.py", decorator)


def test_nested_functions_belong_to_their_outer_function() -> None:
    change = changed_functions("pkg/lib.py", LIB, LIB.replace("return a + b", "return a - b"))
    assert place(LIB, "total") in change.functions


def test_deleted_and_inserted_lines_name_the_function_on_either_side() -> None:
    inserted = LIB.replace("    return x + 1\n", "    x = -x\n    return x + 1\n")
    assert changed_functions("pkg/lib.py", LIB, inserted).functions == {place(LIB, "helper")}
    # the map made on the longer version: the line is deleted on the other side
    assert changed_functions("pkg/lib.py", inserted, LIB).functions == {place(LIB, "helper")}


@pytest.mark.parametrize("old,new,why", [
    ("LIMIT = 10", "LIMIT = 11", "outside any function body"),
    ('"""Twice x."""', '"""Two times x."""', "outside any function body"),
    ("def double(x):", "def double(x=1):", "outside any function body"),
    ("    size = 3", "    size = 4", "outside any function body"),
    ("range(3)", "range(4)", "outside any function body"),
])
def test_changes_outside_function_bodies_reach_every_test(old: str, new: str, why: str) -> None:
    assert why in changed_functions("pkg/lib.py", LIB, LIB.replace(old, new)).everywhere


def test_other_files_reach_every_test() -> None:
    assert changed_functions("pkg/data.json", "{}", "[]").everywhere
    assert changed_functions("tests/test_lib.py", LIB, LIB + "\n").everywhere
    assert changed_functions("pkg/lib.py", LIB, "def (").everywhere
    assert combine([Change(frozenset({("a.py", 1)})), Change(everywhere="x")]).everywhere == "x"
    assert combine([Change(frozenset({("a.py", 1)})), Change(frozenset({("b.py", 2)}))]) \
        .functions == {("a.py", 1), ("b.py", 2)}


def test_the_map_selects_the_tests_that_reach_a_change() -> None:
    cmap = CoverageMap(tests={"t::a": frozenset({("p.py", 1)}), "t::b": frozenset({("p.py", 5)}),
                              "t::c": frozenset()},
                       collection=frozenset({("p.py", 9)}), unmapped=frozenset({"q.py"}))
    assert cmap.affected(Change(frozenset({("p.py", 1)}))) == {"t::a"}
    assert cmap.affected(Change(frozenset({("p.py", 7)}))) == set()
    assert cmap.affected(Change(everywhere="module code")) is None
    assert cmap.affected(Change(frozenset({("p.py", 9)}))) is None  # runs at import time
    assert cmap.affected(Change(frozenset({("q.py", 1)}))) is None  # its calls were not seen
    affected, sample = cmap.selection(Change(frozenset({("p.py", 1)})), 1, seed=3)
    assert affected == {"t::a"} and len(sample) == 1 and sample[0] in {"t::b", "t::c"}
    assert cmap.selection(Change(frozenset({("p.py", 1)})), 1, seed=3)[1] == sample


# ---------------------------------------------------------------------------- the plugin

TESTS = textwrap.dedent('''\
    import threading

    from pkg.lib import Box, double, helper


    def test_helper():
        assert helper(1) == 2


    def test_double():
        assert double(3) == 6


    def test_box_in_a_thread():
        out = []
        t = threading.Thread(target=lambda: out.append(Box([1, 2]).total))
        t.start(); t.join()
        assert out == [4]


    def test_fails():
        assert double(2) == 5, "double(2) should be 5"


    def test_raises():
        Box(None)
    ''')


def run_plugin(root: Path, entries: bool = False) -> dict:
    plugin_dir = root.parent / "plugin"
    plugin_dir.mkdir(exist_ok=True)
    source = Path(__file__).parents[2] / "tasks" / "coverage_plugin.py"
    (plugin_dir / "repogym_coverage.py").write_text(source.read_text())
    out = root.parent / ("entries.json" if entries else "map.json")
    env = {**os.environ, "PYTHONPATH": f"{plugin_dir}{os.pathsep}{root}",
           "REPOGYM_COVERAGE_ROOT": str(root), "REPOGYM_COVERAGE_OUT": str(out),
           "REPOGYM_COVERAGE_PACKAGES": "pkg", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
           "REPOGYM_COVERAGE_ENTRIES": "1" if entries else ""}
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o",
                    "addopts=", f"--rootdir={root}", "-p", "repogym_coverage", "tests"],
                   cwd=root, env=env, capture_output=True, check=False)
    return json.loads(out.read_text())


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "pkg" / "__init__.py").write_text("from .lib import *  # noqa\n")
    (root / "pkg" / "lib.py").write_text(LIB)
    (root / "tests" / "test_lib.py").write_text(TESTS)
    return root


def test_the_plugin_maps_tests_to_the_functions_they_call(project: Path) -> None:
    cmap = CoverageMap.from_json(json.dumps(run_plugin(project)))
    assert set(cmap.tests) == {f"tests/test_lib.py::{n}" for n in (
        "test_helper", "test_double", "test_box_in_a_thread", "test_fails", "test_raises")}
    helper, double, total = (place(LIB, n) for n in ("helper", "double", "total"))
    assert cmap.tests["tests/test_lib.py::test_helper"] == {helper}
    assert cmap.tests["tests/test_lib.py::test_double"] == {helper, double}
    # a thread the test starts counts for the test; nested functions are recorded too
    assert total in cmap.tests["tests/test_lib.py::test_box_in_a_thread"]
    assert helper in cmap.collection  # TABLE is computed when the module is imported
    assert cmap.modules == {"pkg": str(project / "pkg" / "__init__.py")}
    assert not cmap.unmapped
    change = changed_functions("pkg/lib.py", LIB, LIB.replace("2 * helper", "3 * helper"))
    assert cmap.affected(change) == {"tests/test_lib.py::test_double",
                                     "tests/test_lib.py::test_fails"}
    # helper runs at import time: a change there may reach every test
    assert cmap.affected(changed_functions("pkg/lib.py", LIB,
                                           LIB.replace("x + 1", "x + 2"))) is None


def test_entries_name_what_failing_tests_call_and_what_they_saw(project: Path) -> None:
    data = run_plugin(project, entries=True)
    assert data["entries"]["tests/test_lib.py::test_fails"] == [
        f"pkg/lib.py:{place(LIB, 'double')[1]}:double"]
    failure = data["failures"]["tests/test_lib.py::test_fails"]
    assert failure["when"] == "call" and "double(2) should be 5" in failure["message"]
    assert "TypeError" in data["failures"]["tests/test_lib.py::test_raises"]["message"]


def test_public_names_skip_private_code() -> None:
    files = {"pkg/__init__.py": "from .lib import double\n"}
    assert public_name("pkg/lib.py:3:double", files.get) == "pkg.double"
    assert public_name("pkg/lib.py:3:helper", files.get) == "pkg.lib.helper"
    assert public_name("pkg/lib.py:3:_private", files.get) is None
    assert public_name("pkg/_impl.py:3:run", files.get) == "pkg.run"
    assert public_name("pkg/lib.py:3:Box.__repr__", files.get) is None
