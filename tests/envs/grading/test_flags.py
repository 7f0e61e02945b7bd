"""The grader's flags: their values are what results files hold, so they never change."""

from __future__ import annotations

import json

import pytest

from repogym.envs.grading import protect, protect_langs
from repogym.envs.grading.flags import PROTECTED, Flag, tampered_flags


def test_values_are_the_recorded_names() -> None:
    assert {flag.value for flag in Flag} == {
        "patch_failed", "patch_mismatch", "diff_failed", "canary", "timeout", "exit_status",
        "report_mismatch", "decoy", "always_equal", "tampered_task_test_file", "tampered_conftest",
        "tampered_pytest_config", "tampered_startup_hook", "tampered_test_path",
        "tampered_test_file", "tampered_runner_config", "tampered_dependencies"}
    # a flag is its name wherever it goes: lists of names, JSON, text
    assert Flag.CANARY in ["canary"] and "canary" in [Flag.CANARY]
    assert json.dumps([Flag.TIMEOUT]) == '["timeout"]' and f"{Flag.TIMEOUT}" == "timeout"


def test_every_protection_reason_has_its_flag() -> None:
    for reason in PROTECTED:
        assert Flag.tampered(reason).value == f"tampered_{reason}"
    found = {protect.protected_reason(path, set()) for path in
             ("a/conftest.py", "pytest.ini", "sitecustomize.py", "tests/x.py", "test_x.py")}
    found |= {protect_langs.protected_reason(path, "javascript") for path in
              ("node_modules/a/b.js", "jest.config.js", "src/a.test.js")}
    assert found <= set(PROTECTED)


def test_tampered_flags_one_per_reason_in_order() -> None:
    stripped = {"tests/a.py": "test_path", "conftest.py": "conftest", "tests/b.py": "test_path"}
    assert tampered_flags(stripped) == [Flag.TAMPERED_CONFTEST, Flag.TAMPERED_TEST_PATH]
    with pytest.raises(ValueError, match="no such reason"):
        tampered_flags({"x": "made_up"})
