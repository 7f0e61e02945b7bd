"""Deriving and validating a task's lists in Docker: how failures are told apart."""

from __future__ import annotations

import pytest

from repogym.schema import Environment, Task
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


FREED = [
    "import gc",
    "import weakref",
    "",
    "from calc import mul",
    "",
    "",
    "def test_a_freed_object_is_gone():",
    "    gc.disable()",
    "    try:",
    "        box = type('Box', (), {})()",
    "        box.value = mul(2, 3)",
    "        assert box.value == 6",
    "        weak = weakref.ref(box)",
    "        del box",
    "        assert weak() is None",
    "    finally:",
    "        gc.enable()",
]
FREED_PATCH = ("diff --git a/tests/test_freed.py b/tests/test_freed.py\nnew file mode 100644\n"
               f"--- /dev/null\n+++ b/tests/test_freed.py\n@@ -0,0 +1,{len(FREED)} @@\n"
               + "".join(f"+{line}\n" for line in FREED))


def test_gold_that_fails_only_with_the_pass_hook_is_kept_without_it(
        toy_task: Task, toy_image: str) -> None:
    from repogym.tasks.validate import without_pass_hook

    # pytest's assertion pass hook keeps `box` alive past `del box` (flask's
    # test_app_freed_on_zero_refcount fails the same way)
    task = toy_task.with_(test_patch=toy_task.test_patch + FREED_PATCH,
                          PASS_TO_PASS=(*toy_task.PASS_TO_PASS,
                                        "tests/test_freed.py::test_a_freed_object_is_gone"))
    first = validate_task(task, runs=1)
    assert not first.ok and "test_a_freed_object_is_gone" in first.reason, first.reason
    kept, result = without_pass_hook(task, first, runs=1)
    assert result.ok and "without the assertion pass hook" in result.reason, result.reason
    assert kept.environment.assertion_pass_hook is False
    assert kept.to_dict()["environment"]["assertion_pass_hook"] is False
    assert kept.task_hash != task.task_hash
    # a task that fails for another reason stays rejected, and keeps the hook
    broken = toy_task.with_(patch="")
    again = validate_task(broken, runs=1)
    assert without_pass_hook(broken, again, runs=1) == (broken, again)
