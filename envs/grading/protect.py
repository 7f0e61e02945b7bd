"""Which paths an agent may not change: tests, test configuration and interpreter start-up hooks.

Changes to these are removed before grading and recorded as flags. ``setup.cfg``,
``pyproject.toml``, ``setup.py`` and ``tox.ini`` are judged by content: only a change to their
pytest configuration (or pytest plugin entry points) is removed, so ordinary edits survive; a
test command that runs tox reads all of ``tox.ini``, and then any change to it is removed.
"""

from __future__ import annotations

import configparser
import fnmatch
import tomllib
from collections.abc import Callable

from repogym.envs.grading.flags import Protected

TEST_DIRS = {"tests", "test", "testing"}
PYTEST_CONFIGS = {"pytest.ini", ".pytest.ini"}
STARTUP_HOOKS = {"sitecustomize.py", "usercustomize.py"}
CONTENT_CHECKED = {"setup.cfg", "pyproject.toml", "setup.py", "tox.ini"}


def protected_reason(path: str, task_test_files: frozenset[str] | set[str]) -> Protected | None:
    """Why ``path`` is off limits for the agent, or None when it may be changed."""
    parts = path.split("/")
    name = parts[-1]
    if path in task_test_files:
        return "task_test_file"
    if name == "conftest.py":
        return "conftest"
    if name in PYTEST_CONFIGS:
        return "pytest_config"
    if name in STARTUP_HOOKS or name.endswith(".pth"):
        return "startup_hook"
    if any(p in TEST_DIRS for p in parts[:-1]):
        return "test_path"
    if fnmatch.fnmatch(name, "test_*.py") or fnmatch.fnmatch(name, "*_test.py"):
        return "test_file"
    return None


def pytest_settings(name: str, text: str, tox: bool = False) -> str:
    """The part of a setup file that configures pytest, normalised for comparison. ``tox``:
    the test command runs tox, which reads all of ``tox.ini``."""
    if name == "tox.ini":  # and every line that names pytest, however its section is spelt
        return text if tox else _sections(text, lambda s, _v: s == "pytest") + "\n" + \
            _pytest_lines(text)
    if name == "setup.cfg":
        return _sections(text, lambda s, values: s in ("tool:pytest", "pytest")
                         or "pytest11" in str(values))
    if name == "pyproject.toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            return "unparsable:" + text
        tool = data.get("tool", {})
        plugins = data.get("project", {}).get("entry-points", {}).get("pytest11")
        return repr((tool.get("pytest"), plugins, _find(tool, "pytest11")))
    # setup.py: any line that mentions pytest
    return _pytest_lines(text)


def _pytest_lines(text: str) -> str:
    return "\n".join(line.strip() for line in text.splitlines() if "pytest" in line.lower())


def _sections(text: str, keep: Callable[[str, dict[str, str]], bool]) -> str:
    """The ini file's sections ``keep`` picks (by name and values), normalised."""
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text)
    except configparser.Error:
        return "unparsable:" + text
    return repr(sorted((s, dict(parser[s])) for s in parser.sections()
                       if keep(s, dict(parser[s]))))


def _find(tree: object, key: str) -> list[object]:
    found: list[object] = []
    if isinstance(tree, dict):
        for k, v in tree.items():
            found += [v] if k == key else _find(v, key)
    return found
