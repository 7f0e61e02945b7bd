"""Tests that read their own module's name (``environment.disguise``), against a real engine.

sphinx-doc__sphinx-8627's typing tests expect ``restify`` of a class they define to read
``tests.test_util_typing.MyClass1``; the disguise runs the hidden tests under another module's
name, so gold failed. A task validation found so runs its hidden tests as themselves."""

from __future__ import annotations

import pytest

from repogym.envs.grading.grader import Grader, GraderConfig
from repogym.schema import Task
from repogym.tasks.validate import relaxations, validate_task, with_own_names

pytestmark = pytest.mark.docker

OWN_NAME = """\
diff --git a/tests/test_add.py b/tests/test_add.py
new file mode 100644
--- /dev/null
+++ b/tests/test_add.py
@@ -0,0 +1,13 @@
+from calc import add
+
+
+class Sum:
+    pass
+
+
+def test_add():
+    assert (Sum.__module__.rpartition(".")[2], add(2, 3)) == ("test_add", 5)
+
+
+def test_add_negative():
+    assert add(-2, -3) == -5
"""


def test_validation_keeps_a_task_whose_tests_read_their_own_names(toy_task: Task) -> None:
    task = toy_task.with_(instance_id="toy__calc-own-names", test_patch=OWN_NAME)
    first = validate_task(task, runs=1)
    assert not first.ok and first.reason.startswith("gold does not resolve"), first.reason
    assert "tests/test_add.py::test_add'" in first.reason  # the one that reads its name
    kept, result = relaxations(task, first, runs=1)
    assert result.ok and "read their own module's names" in result.reason, result.reason
    assert not kept.environment.disguise
    assert kept.to_dict()["environment"]["disguise"] is False
    assert "disguise" not in task.to_dict()["environment"]  # on: the record as it always was
    assert Task.from_dict(kept.to_dict()) == kept
    assert result.empty_resolved == [False]
    assert with_own_names(kept, result, runs=1) == (kept, result)
    # graded as itself, the canaries still there
    report = Grader(GraderConfig(cleanup_async=False)).grade(kept, kept.patch, first_image(kept))
    assert report.resolved and report.valid and report.canaries, report
    assert report.disguised == {} and report.decoys == {}
    # a task that fails for another reason stays rejected, disguised
    broken = task.with_(patch="")
    again = validate_task(broken, runs=1)
    assert with_own_names(broken, again, runs=1) == (broken, again)


def first_image(task: Task) -> str:
    from repogym.images.repository import ensure_image

    return ensure_image(task, progress=lambda _m: None).tag
