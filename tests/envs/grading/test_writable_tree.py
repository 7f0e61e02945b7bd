"""Tests that write into the repository (``environment.tests_write``), against a real engine.

pylint-dev__pylint-7080's test makes ``tests/testbed/`` beside itself; the grading run made the
folders on the way to a test file root's and closed, so gold failed. A task validation found
writing gets its root and its test modules' folders open as /tmp is, the names pytest and
Python read on their own kept root's."""

from __future__ import annotations

import pytest

from repogym.envs.grading.pytest_run import opened_dirs
from repogym.envs.grading.stage import NOWHERE, RESERVED, open_script
from repogym.sandbox.base import SandboxConfig
from repogym.sandbox.docker import DockerSandbox
from repogym.schema import Task
from repogym.tasks.validate import validate_task, with_tests_writing

WRITER = """\
diff --git a/tests/test_add.py b/tests/test_add.py
new file mode 100644
--- /dev/null
+++ b/tests/test_add.py
@@ -0,0 +1,14 @@
+import pathlib
+
+from calc import add
+
+
+def test_add():
+    made = pathlib.Path(__file__).parent / "made"
+    made.mkdir(exist_ok=True)
+    (made / "out.txt").write_text("beside the test")
+    assert add(2, 3) == 5
+
+
+def test_add_negative():
+    pathlib.Path("top.txt").write_text("at the root")
+    assert add(-2, -3) == -5
"""


def test_the_opened_folders_are_the_root_and_the_test_modules_own() -> None:
    assert opened_dirs(["tests/unit/test_a.py", "tests/unit/test_b.py", "test_top.py"]) == [
        ".", "tests/unit"]
    assert open_script([]) == ""


@pytest.mark.docker
def test_validation_keeps_a_writing_task_with_its_folders_open(toy_task: Task) -> None:
    task = toy_task.with_(instance_id="toy__calc-writes", test_patch=WRITER)
    first = validate_task(task, runs=1)
    assert not first.ok and first.reason.startswith("gold does not resolve"), first.reason
    kept, result = with_tests_writing(task, first, runs=1)
    assert result.ok and "the tests write into the repository" in result.reason, result.reason
    assert kept.environment.tests_write and kept.to_dict()["environment"]["tests_write"] is True
    assert result.empty_resolved == [False]  # open folders make the empty patch resolve nothing
    assert with_tests_writing(kept, result, runs=1) == (kept, result)
    # a task that fails for another reason stays rejected, its folders closed
    broken = toy_task.with_(patch="")
    again = validate_task(broken, runs=1)
    assert with_tests_writing(broken, again, runs=1) == (broken, again)


@pytest.mark.docker
def test_what_the_tests_may_not_do_in_an_opened_folder(toy_image: str) -> None:
    """Add a file: yes. Add or replace what pytest or Python reads on its own, remove or
    rename a file that is not theirs: no."""
    box = DockerSandbox(SandboxConfig(image=toy_image, role="grader"))
    try:
        box.run("mkdir -p tests/__pycache__ && touch tests/__pycache__/cached.pyc", timeout=30)
        staged = box.exec(["bash", "-c", "chown root:root tests/test_mul.py && "
                           + open_script([".", "tests"])], user="root")
        assert staged.exit_code == 0, staged.output
        probe = box.run(
            "touch tests/new.txt && echo new-ok; "
            "echo x >> tests/__pycache__/cached.pyc 2>/dev/null && echo 'MADE cached'; "
            "for n in conftest.py tests/conftest.py tests/__pycache__/t.pyc pytest.ini "
            "tests/tox.ini; do mkdir -p \"$(dirname $n)\" 2>/dev/null; "
            "echo x > $n 2>/dev/null && echo \"MADE $n\"; done; "
            "rm -f tests/conftest.py 2>/dev/null && echo 'REMOVED link'; "
            "mv tests/test_mul.py tests/x.py 2>/dev/null && echo 'MOVED test'; "
            "rm -f tests/test_mul.py 2>/dev/null && echo 'REMOVED test'; "
            "mv tests elsewhere 2>/dev/null && echo 'MOVED folder'; "
            "ls -ld . tests | cut -c1-10; readlink tests/conftest.py", timeout=30)
        out = probe.output
        assert "new-ok" in out and "MADE" not in out and "REMOVED" not in out, out
        assert "MOVED" not in out, out
        assert out.count("drwxrwxrwt") == 2 and NOWHERE in out, out
        names = box.exec(["bash", "-c", "stat -c '%U %n' " + " ".join(
            f"tests/{n}" for n in RESERVED)], user="root")
        assert names.output.split().count("root") == len(RESERVED), names.output
    finally:
        box.close()
