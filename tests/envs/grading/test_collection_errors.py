"""A test file that does not collect: its tests errored (the run stays valid, the canaries
ran), and a run with such a file does not resolve, as pytest's plain run would have stopped."""

from __future__ import annotations

import pytest
from toy_repo import new_file

from repogym.envs.grading.grader import Grader, GraderConfig
from repogym.schema import Task

pytestmark = pytest.mark.docker

SUB_TESTS = new_file("tests/test_sub.py",
                     "from calc import sub\n\n\ndef test_sub():\n    assert sub(5, 3) == 2\n")

SUB = """\
diff --git a/calc/__init__.py b/calc/__init__.py
--- a/calc/__init__.py
+++ b/calc/__init__.py
@@ -1,5 +1,9 @@
 \"\"\"A tiny calculator.\"\"\"
 
 
+def sub(a, b):
+    return a - b
+
+
 def add(a, b):
     return a - b
 
"""

NO_MUL = """\
diff --git a/calc/__init__.py b/calc/__init__.py
--- a/calc/__init__.py
+++ b/calc/__init__.py
@@ -2,13 +2,9 @@
 
 
 def add(a, b):
-    return a - b
-
-
-def mul(a, b):
-    return a * b
+    return a + b
 
 
 def clamp(x, lo, hi):
     \"\"\"Limits x to [lo, hi].\"\"\"
     return max(lo, min(x, hi))
"""


@pytest.fixture(scope="module")
def grader() -> Grader:
    return Grader(GraderConfig(timeout=60, cleanup_async=False), seed=3)


def test_hidden_tests_whose_file_does_not_import_without_the_fix_errored(
    grader: Grader, toy_task: Task, toy_image: str
) -> None:
    task = toy_task.with_(instance_id="toy__calc-sub", test_patch=SUB_TESTS, patch=SUB,
                          FAIL_TO_PASS=("tests/test_sub.py::test_sub",))
    empty = grader.grade(task, "", toy_image)
    assert empty.valid and not empty.resolved, empty.invalid_reasons
    assert empty.fail_to_pass == {"tests/test_sub.py::test_sub": "ERROR"}
    assert empty.collection_errors == ["tests/test_sub.py"]
    assert set(empty.canaries.values()) == {"PASSED", "FAILED"}
    assert empty.p2p_pass_rate == 1.0  # the other files ran
    gold = grader.grade(task, SUB, toy_image)
    assert gold.valid and gold.resolved and not gold.collection_errors


def test_a_change_that_breaks_a_test_files_import_fails_it_and_does_not_resolve(
    grader: Grader, toy_task: Task, toy_image: str
) -> None:
    broken = grader.grade(toy_task, NO_MUL, toy_image)  # the fix, and mul gone
    assert broken.patch_applied and broken.valid, broken.invalid_reasons
    assert not broken.resolved and broken.f2p_pass_rate == 1.0
    assert broken.collection_errors == ["tests/test_mul.py"]
    assert set(broken.pass_to_pass.values()) == {"ERROR"}
