"""A SWE-bench-shaped Django instance made from Django's sdist, which ships tests/runtests.py.

django/django itself is larger than this machine can mirror, so its SWE-bench instances
cannot be built here; this stand-in goes through the same Django path: the repository named
``django/django`` at version 4.2, swebench's spec for it (``./tests/runtests.py --verbosity 2
--settings=test_sqlite --parallel 1``), swebench's Django log parser, and the test directives
as module names (``utils_tests.test_text``). The base commit is the sdist's tree with one bug
put in (``capfirst`` lowers the rest of the string); the gold patch takes it out and the test
patch adds a test of it. Only the test folders the run needs are kept (the sdist's tests/ is
60 MB).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

VERSION = "4.2.16"
GIT = ["git", "-c", "user.name=a", "-c", "user.email=a@b", "-c", "core.autocrlf=false"]
KEEP_TESTS = ("runtests.py", "test_sqlite.py", "urls.py", "utils_tests")
FIXED = "    return x[0].upper() + x[1:]\n"
BROKEN = "    return x[0].upper() + x[1:].lower()\n"
NEW_TEST = '''
    def test_capfirst(self):
        self.assertEqual(text.capfirst("hello World"), "Hello World")
        self.assertEqual(text.capfirst(""), "")
'''
CLASS = "utils_tests.test_text.TestUtilsText"
FAIL_TO_PASS = [f"test_capfirst ({CLASS})"]
PASS_TO_PASS = [f"test_get_text_list ({CLASS})", f"test_smart_split ({CLASS})",
                f"test_wrap ({CLASS})"]
ENV_YAML = """\
django/django:
  "4.2":
    python: "3.9"
    setup: ["python -m pip install -e ."]
    test_cmd: ./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1
"""


def sdist(folder: Path) -> Path:
    """Django's sdist, downloaded from the package index into ``folder`` once."""
    archive = folder / f"Django-{VERSION}.tar.gz"
    if not archive.exists():
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                        "--no-binary", ":all:", f"Django=={VERSION}", "-d", str(folder)],
                       check=True, timeout=600)
    return archive


def _git(root: Path, *args: str) -> str:
    return subprocess.run([*GIT, "-C", str(root), *args], check=True, capture_output=True,
                          text=True).stdout


def mirror(archive: Path, repos: Path) -> tuple[str, str, str]:
    """``repos/django__django`` as a git repository at the stand-in's base commit; returns
    (base commit, gold patch, test patch)."""
    root = repos / "django__django"
    with tarfile.open(archive) as tar:
        tar.extractall(repos / "unpack", filter="data")
    shutil.move(str(repos / "unpack" / f"Django-{VERSION}"), root)
    shutil.rmtree(repos / "unpack")
    for child in (root / "tests").iterdir():
        if child.name not in KEEP_TESTS:
            shutil.rmtree(child) if child.is_dir() else child.unlink()
    text_py = root / "django" / "utils" / "text.py"
    source = text_py.read_text()
    assert FIXED in source, "capfirst is not as this stand-in expects"
    text_py.write_text(source.replace(FIXED, BROKEN, 1))
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "Django sdist with a bug")
    base = _git(root, "rev-parse", "HEAD").strip()
    text_py.write_text(source)
    patch = _git(root, "diff")
    _git(root, "checkout", "--", ".")
    tests = root / "tests" / "utils_tests" / "test_text.py"
    lines = tests.read_text()
    marker = "class TestUtilsText(SimpleTestCase):\n"
    tests.write_text(lines.replace(marker, marker + NEW_TEST + "\n", 1))
    test_patch = _git(root, "diff")
    _git(root, "checkout", "--", ".")
    return base, patch, test_patch


def instance(base: str, patch: str, test_patch: str) -> dict[str, Any]:
    return {"repo": "django/django", "instance_id": "django__django-99999", "version": "4.2",
            "base_commit": base, "environment_setup_commit": base, "patch": patch,
            "test_patch": test_patch, "problem_statement": "capfirst() lowercases the rest.",
            "FAIL_TO_PASS": json.dumps(FAIL_TO_PASS), "PASS_TO_PASS": json.dumps(PASS_TO_PASS)}
