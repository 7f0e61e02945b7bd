"""Every REPOGYM_* variable is read through repogym.settings, at call time, and documented."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from repogym import settings
from repogym.sandbox.base import default_run_id

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("repogym", "envs", "tasks", "agents", "scripts", "bench")
# a read of the process's environment that names a variable of ours
READ = re.compile(r"""environ(?:\.get\(|\[)\s*["']REPOGYM_""")
# modules that run inside containers, where the variables are theirs, set by the code that
# starts them (not settings of this process)
IN_CONTAINERS = {"tasks/coverage_plugin.py", "envs/grading/harness_plugin.py"}


def test_only_the_settings_module_reads_repogym_variables() -> None:
    readers = []
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            rel = path.relative_to(ROOT).as_posix()
            if "/src/" in rel or rel == "repogym/settings.py" or rel in IN_CONTAINERS:
                continue  # the demo repositories are no part of repogym
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                # scripts that run in containers name their own variables in strings
                if READ.search(line) and "'REPOGYM_TRACE'" not in line:
                    readers.append(f"{rel}:{n}")
    assert not readers, readers


def test_every_setting_is_documented_in_the_manual() -> None:
    """The settings page is made from ``settings.SETTINGS`` when the manual is built."""
    from repogym.scripts.docs_ref import settings_table

    assert "<!-- generated: settings -->" in (ROOT / "docs" / "settings.md").read_text()
    table = settings_table()
    for setting in settings.SETTINGS:
        default = f"`{setting.default}`" if setting.default else "unset"
        assert f"| `{setting.name}` | {default} | {setting.help} |" in table, setting.name
    assert table.count("| `REPOGYM_") == len(settings.SETTINGS)


def test_settings_are_read_when_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPOGYM_RUN_ID", "set-after-import")
    assert default_run_id() == "set-after-import"
    monkeypatch.setenv("REPOGYM_BUILD_TIMEOUT", "")
    assert settings.BUILD_TIMEOUT.number() == 3600  # empty is unset
    monkeypatch.setenv("REPOGYM_BUILD_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="REPOGYM_BUILD_TIMEOUT='soon' is not a number"):
        settings.BUILD_TIMEOUT.number()
    monkeypatch.setenv("REPOGYM_MAX_STARTS", "2.5")
    with pytest.raises(ValueError, match="not a whole number"):
        settings.MAX_STARTS.integer()
