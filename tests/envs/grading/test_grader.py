"""The grader on a real engine: verdicts, stripping of test changes, canaries, limits."""

from __future__ import annotations

import pytest
from toy_repo import new_file

from repogym.envs.grading import stage
from repogym.envs.grading.grader import Grader, GraderConfig
from repogym.schema import Task

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def grader() -> Grader:
    return Grader(GraderConfig(timeout=60, cleanup_async=False), seed=1)


def test_gold_resolves_and_empty_does_not(grader: Grader, toy_task: Task, toy_image: str) -> None:
    gold = grader.grade(toy_task, toy_task.patch, toy_image)
    assert gold.resolved and gold.valid and gold.f2p_pass_rate == 1.0 and not gold.flags
    assert set(gold.canaries.values()) == {"PASSED", "FAILED"}
    empty = grader.grade(toy_task, "", toy_image)
    assert not empty.resolved and empty.valid and empty.f2p_pass_rate == 0.0
    assert empty.p2p_pass_rate == 1.0


def test_hidden_tests_run_under_other_names_then_their_decoys_fail(
    toy_task: Task, toy_image: str
) -> None:
    # no PASS_TO_PASS test drawn into the decoys: they hold the hidden tests alone
    grader = Grader(GraderConfig(timeout=60, cleanup_async=False, decoy_p2p=0), seed=1)
    gold = grader.grade(toy_task, toy_task.patch, toy_image)
    assert gold.resolved and set(gold.disguised) == {"tests/test_add.py", "tests/test_mul.py"}
    new = gold.disguised["tests/test_add.py"]
    assert f"PASSED {new}::test_add" in gold.log_tail and "tests/test_add.py::" not in (
        gold.log_tail)
    # the decoy run: the hidden tests at their own ids, each failing after its body ran
    assert set(gold.decoys) == {"tests/test_add.py::test_add",
                                "tests/test_add.py::test_add_negative"}
    assert set(gold.decoys.values()) == {"FAILED"} and gold.decoy_seconds > 0


FORGED_RECORD = """import json as _json, os as _os
_fd = _os.open("/opt/repogym-grade/rec.fifo", _os.O_WRONLY)
for _node in ("tests/test_add.py::test_add", "tests/test_add.py::test_add_negative"):
    _body = _json.dumps({"k": "r", "id": _node, "w": "call", "o": "passed", "n": 1})
    _os.write(_fd, ("0" * 64 + " " + _body + "\\n").encode())
"""


def test_records_the_code_under_test_writes_do_not_count(
    grader: Grader, toy_task: Task, toy_image: str
) -> None:
    patch = new_file("calc/forge.py", FORGED_RECORD) + (
        "diff --git a/calc/__init__.py b/calc/__init__.py\n--- a/calc/__init__.py\n"
        '+++ b/calc/__init__.py\n@@ -1,2 +1,3 @@\n """A tiny calculator."""\n'
        "+import calc.forge\n \n"
    )
    report = grader.grade(toy_task, patch, toy_image)
    assert not report.resolved and not report.valid and "report_mismatch" in report.flags
    assert any("did not verify" in r for r in report.invalid_reasons), report.invalid_reasons


def test_changes_to_tests_are_stripped_and_flagged(
    grader: Grader, toy_task: Task, toy_image: str
) -> None:
    hook = "def pytest_runtest_makereport(item, call):\n    call.excinfo = None\n"
    patch = (
        new_file("conftest.py", hook)
        + new_file("tests/conftest.py", hook)
        + new_file("tests/test_add.py", "def test_add():\n    pass\n")
    )
    report = grader.grade(toy_task, patch, toy_image)
    assert not report.resolved
    assert set(report.stripped) == {"conftest.py", "tests/conftest.py", "tests/test_add.py"}
    assert "tampered_conftest" in report.flags and "tampered_task_test_file" in report.flags


def test_gold_with_tampering_still_counts_only_the_real_fix(
    grader: Grader, toy_task: Task, toy_image: str
) -> None:
    patch = toy_task.patch + new_file("tests/conftest.py", "import sys\nsys.exit(0)\n")
    report = grader.grade(toy_task, patch, toy_image)
    assert report.resolved and report.stripped == {"tests/conftest.py": "conftest"}


def test_exit_at_import_is_invalid(grader: Grader, toy_task: Task, toy_image: str) -> None:
    patch = new_file("calc/boot.py", "import os\nos._exit(0)\n") + (
        "diff --git a/calc/__init__.py b/calc/__init__.py\n--- a/calc/__init__.py\n"
        '+++ b/calc/__init__.py\n@@ -1,2 +1,3 @@\n """A tiny calculator."""\n'
        "+import calc.boot\n \n"
    )
    report = grader.grade(toy_task, patch, toy_image)
    assert not report.resolved and not report.valid
    assert report.f2p_pass_rate == 0.0


def test_forced_passes_from_package_code_trip_the_canaries(
    grader: Grader, toy_task: Task, toy_image: str
) -> None:
    force = (
        "import _pytest.reports as r\n_orig = r.TestReport.from_item_and_call\n"
        "def _forced(item, call):\n    rep = _orig(item, call)\n"
        "    rep.outcome = 'passed'\n    return rep\n"
        "r.TestReport.from_item_and_call = staticmethod(_forced)\n"
    )
    patch = new_file("calc/force.py", force) + (
        "diff --git a/calc/__init__.py b/calc/__init__.py\n--- a/calc/__init__.py\n"
        '+++ b/calc/__init__.py\n@@ -1,2 +1,3 @@\n """A tiny calculator."""\n'
        "+import calc.force\n \n"
    )
    report = grader.grade(toy_task, patch, toy_image)
    assert not report.resolved and not report.valid and "canary" in report.flags


def test_a_hang_times_out(toy_task: Task, toy_image: str) -> None:
    quick = Grader(GraderConfig(timeout=5, cleanup_async=False))
    patch = new_file("calc/spin.py", "while True:\n    pass\n") + (
        "diff --git a/calc/__init__.py b/calc/__init__.py\n--- a/calc/__init__.py\n"
        '+++ b/calc/__init__.py\n@@ -1,2 +1,3 @@\n """A tiny calculator."""\n'
        "+import calc.spin\n \n"
    )
    report = quick.grade(toy_task, patch, toy_image)
    assert report.timed_out and not report.resolved and "timeout" in report.flags
    assert report.total_seconds < 30


RENAME_TEST_AWAY = """\
diff --git a/tests/test_mul.py b/calc/mul_checks.py
similarity index 100%
rename from tests/test_mul.py
rename to calc/mul_checks.py
"""


def test_a_test_file_renamed_away_comes_back(
    grader: Grader, toy_task: Task, toy_image: str
) -> None:
    # git's --numstat names only a rename's new path; the old one is a test file all the same
    report = grader.grade(toy_task, toy_task.patch + RENAME_TEST_AWAY, toy_image)
    assert report.stripped == {"tests/test_mul.py": "test_path"}
    assert report.resolved and report.valid
    assert report.pass_to_pass == {t: "PASSED" for t in toy_task.PASS_TO_PASS}


def test_paths_the_host_did_not_see_invalidate_the_run(
    grader: Grader, toy_task: Task, toy_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # stands in for a patch that the host's git and the container's git read differently
    monkeypatch.setattr(stage, "patch_paths", lambda patch: [])
    report = grader.grade(toy_task, toy_task.patch, toy_image)
    assert not report.resolved and not report.valid and "patch_mismatch" in report.flags
