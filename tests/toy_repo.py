"""The toy repository the tests share: a bug in calc.add, its fix and the hidden tests that
find it. A module of its own, not the conftest: a test module that imports `conftest` gets
whichever conftest another test imported first."""

from __future__ import annotations

import textwrap
from pathlib import Path

TOY_FILES = {
    "calc/__init__.py": '''\
        """A tiny calculator."""


        def add(a, b):
            return a - b


        def mul(a, b):
            return a * b


        def clamp(x, lo, hi):
            """Limits x to [lo, hi]."""
            return max(lo, min(x, hi))
        ''',
    "tests/test_mul.py": """\
        from calc import mul


        def test_mul():
            assert mul(2, 3) == 6


        def test_mul_zero():
            assert mul(0, 5) == 0
        """,
}

TOY_TEST_PATCH = """\
diff --git a/tests/test_add.py b/tests/test_add.py
new file mode 100644
--- /dev/null
+++ b/tests/test_add.py
@@ -0,0 +1,9 @@
+from calc import add
+
+
+def test_add():
+    assert add(2, 3) == 5
+
+
+def test_add_negative():
+    assert add(-2, -3) == -5
"""

TOY_PATCH = """\
diff --git a/calc/__init__.py b/calc/__init__.py
--- a/calc/__init__.py
+++ b/calc/__init__.py
@@ -2,7 +2,7 @@
 
 
 def add(a, b):
-    return a - b
+    return a + b
 
 
 def mul(a, b):
"""


def write_toy_repo(root: Path) -> Path:
    for name, text in TOY_FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def new_file(path: str, text: str) -> str:
    """A git diff that adds ``path`` holding ``text``."""
    lines = text.splitlines()
    body = "".join(f"+{line}\n" for line in lines)
    return (f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n"
            f"+++ b/{path}\n@@ -0,0 +1,{len(lines)} @@\n{body}")
