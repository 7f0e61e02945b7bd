"""A change that breaks the package's import, checked on a real engine: without the fix no
test file collects, the canaries' inside the package neither (voluptuous 0.16.0: a planted bug
in a schema built at import). SWE-bench keeps such an instance, every test erroring before the
fix; it was rejected here as "tests not collected without it". It is a task now, graded as any
other: the gold resolves it, the empty patch earns nothing."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from repogym.repo import snapshot_commit
from repogym.schema import Environment, Task
from repogym.tasks.validate import derive_lists, validate_task

pytestmark = pytest.mark.docker

FILES = {
    "setup.py": "from setuptools import setup\nsetup(name='rules', packages=['rules'])\n",
    "rules/__init__.py": "from rules.core import DEFAULT, check\n",
    "rules/core.py": """\
        def check(n):
            if n > 0:
                raise ValueError(f"negative: {n}")
            return n


        DEFAULT = check(1)  # built at import
        """,
    "rules/tests/__init__.py": "",
    "rules/tests/test_core.py": """\
        from rules import DEFAULT, check


        def test_default():
            assert DEFAULT == 1


        def test_check():
            assert check(2) == 2
        """,
}

FIX = """\
diff --git a/rules/core.py b/rules/core.py
--- a/rules/core.py
+++ b/rules/core.py
@@ -1,5 +1,5 @@
 def check(n):
-    if n > 0:
+    if n < 0:
         raise ValueError(f"negative: {n}")
     return n
 
"""


def test_a_fix_of_the_packages_import_is_a_task(tmp_path: Path) -> None:
    root = tmp_path / "rules"
    for name, text in FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    task = Task(instance_id="toy__rules-1", repo="toy/rules", base_commit=snapshot_commit(root),
                problem_statement="importing rules raises ValueError", patch=FIX,
                source=str(root), environment=Environment(setup=("pip install -e .",)))
    done, why = derive_lists(task, runs=1)
    assert done is not None, why
    assert set(done.FAIL_TO_PASS) == {"rules/tests/test_core.py::test_default",
                                      "rules/tests/test_core.py::test_check"}
    result = validate_task(done, runs=1)
    assert result.ok, result.reason
    assert result.gold_resolved == [True] and result.empty_resolved == [False]
