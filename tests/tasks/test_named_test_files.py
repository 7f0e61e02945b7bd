"""Which files a test patch gives pytest, checked on a real engine: a test file the patch
deletes is not named (blinker's history: "file or directory not found", exit status 4), and a
patch of data alone names none, so the test modules that read it run (jmespath's history:
the JSON file alone was given to pytest, "collected 0 items"). Both were rejected as "tests
not collected"; both are kept now."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from toy_repo import TOY_PATCH, TOY_TEST_PATCH, write_toy_repo

from repogym.repo import snapshot_commit
from repogym.schema import Task
from repogym.tasks.validate import derive_lists

pytestmark = pytest.mark.docker

DELETE_MUL = """\
diff --git a/tests/test_mul.py b/tests/test_mul.py
deleted file mode 100644
--- a/tests/test_mul.py
+++ /dev/null
@@ -1,9 +0,0 @@
-from calc import mul
-
-
-def test_mul():
-    assert mul(2, 3) == 6
-
-
-def test_mul_zero():
-    assert mul(0, 5) == 0
"""

CASES = textwrap.dedent("""\
    import json
    from pathlib import Path

    import pytest

    from calc import add

    CASES = json.loads((Path(__file__).parent / "cases.json").read_text())


    @pytest.mark.parametrize("a,b,total", CASES)
    def test_add(a, b, total):
        assert add(a, b) == total
    """)

MORE_CASES = """\
diff --git a/tests/cases.json b/tests/cases.json
--- a/tests/cases.json
+++ b/tests/cases.json
@@ -1 +1 @@
-[[0, 0, 0]]
+[[0, 0, 0], [2, 3, 5]]
"""


def _task(root: Path, test_patch: str) -> Task:
    return Task(instance_id=f"toy__{root.name}", repo="toy/calc",
                base_commit=snapshot_commit(root), problem_statement="add subtracts",
                patch=TOY_PATCH, test_patch=test_patch, source=str(root))


def test_a_test_file_the_patch_deletes_is_not_given_to_pytest(tmp_path: Path) -> None:
    root = write_toy_repo(tmp_path / "deletes")
    done, why = derive_lists(_task(root, TOY_TEST_PATCH + DELETE_MUL), runs=1)
    assert done is not None, why
    assert set(done.FAIL_TO_PASS) == {"tests/test_add.py::test_add",
                                      "tests/test_add.py::test_add_negative"}
    assert not any("test_mul" in t for t in done.PASS_TO_PASS)


def test_a_patch_of_data_alone_runs_the_tests_that_read_it(tmp_path: Path) -> None:
    root = write_toy_repo(tmp_path / "data")
    (root / "tests" / "test_cases.py").write_text(CASES)
    (root / "tests" / "cases.json").write_text("[[0, 0, 0]]\n")
    done, why = derive_lists(_task(root, MORE_CASES), runs=1)
    assert done is not None, why
    assert done.FAIL_TO_PASS == ("tests/test_cases.py::test_add[2-3-5]",)
    assert "tests/test_cases.py::test_add[0-0-0]" in done.PASS_TO_PASS
