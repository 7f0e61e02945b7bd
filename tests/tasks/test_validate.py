"""Deriving and validating a task's lists in Docker: how failures are told apart."""

from __future__ import annotations

import pytest

from repogym.tasks.schema import Environment, Task
from repogym.tasks.validate import derive_lists, validate_task

pytestmark = pytest.mark.docker


def test_a_snapshot_whose_setup_fails_is_rejected_not_an_infrastructure_failure(
    toy_task: Task, toy_image: str
) -> None:
    broken = toy_task.with_(environment=Environment(setup=("echo cannot build >&2; exit 3",)))
    task, reason = derive_lists(broken, runs=1)
    assert task is None and reason.startswith("setup fails on this snapshot"), reason
    assert "cannot build" in reason
    result = validate_task(broken, runs=1)
    assert not result.ok and result.reason.startswith("setup fails"), result.reason


SPACED_TESTS = """\
diff --git a/tests/test_add.py b/tests/test_add.py
new file mode 100644
--- /dev/null
+++ b/tests/test_add.py
@@ -0,0 +1,6 @@
+import pytest
+from calc import add
+
+@pytest.mark.parametrize("a,b,want", [(2, 3, 5), (1, 1, 2)], ids=["two and three", "ones"])
+def test_add(a, b, want):
+    assert add(a, b) == want
"""


def test_ids_with_spaces_are_listed_whole_and_validate(toy_task: Task, toy_image: str) -> None:
    bare = toy_task.with_(test_patch=SPACED_TESTS, FAIL_TO_PASS=(), PASS_TO_PASS=())
    task, reason = derive_lists(bare, runs=1)
    assert task is not None, reason
    assert task.FAIL_TO_PASS == ("tests/test_add.py::test_add[ones]",
                                 "tests/test_add.py::test_add[two and three]")
    assert validate_task(task, runs=1).ok


BREAKS_THE_IMPORT = """\
diff --git a/calc/__init__.py b/calc/__init__.py
--- a/calc/__init__.py
+++ b/calc/__init__.py
@@ -1,2 +1,3 @@
 \"\"\"A tiny calculator.\"\"\"
+raise ImportError("broken on purpose")
 
"""


def test_a_patch_that_breaks_collection_is_named_for_it(toy_task: Task, toy_image: str) -> None:
    bare = toy_task.with_(patch=BREAKS_THE_IMPORT, FAIL_TO_PASS=(), PASS_TO_PASS=())
    task, reason = derive_lists(bare, runs=1)
    assert task is None and reason.startswith("tests not collected with the gold patch"), reason
