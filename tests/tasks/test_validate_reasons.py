"""A rejected candidate's reason says what its run showed (no Docker needed)."""

from __future__ import annotations

from repogym.envs.grading.grader import GradingReport
from repogym.tasks.validate import invalid_reason, seen

RAN = """FAILED toolz/tests/test_curried.py::test_reduce - NotImplementedError
=================== 2 failed, 190 passed, 1 skipped in 0.97s ===================
"""
COLLECTION = """ERROR toolz/tests/test_curried.py - ImportError: broken
!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!
=============================== 1 error in 0.21s ===============================
"""
MISSING = {"toolz/tests/test_a_b.py::test_c": "MISSING",
           "toolz/tests/test_a_b.py::test_d": "MISSING"}


def report(log: str, statuses: dict[str, str], canaries: dict[str, str],
           exit_code: int) -> GradingReport:
    rep = GradingReport("x", log_tail=log, statuses=statuses, canaries=canaries,
                        exit_code=exit_code, canary_note="toolz/tests/test_a_b.py (...)")
    rep.invalidate("canary toolz/tests/test_a_b.py::test_c expected PASSED, got MISSING",
                   "canary")
    return rep


def test_tests_that_ran_are_never_called_an_import_failure() -> None:
    rep = report(RAN, {"toolz/tests/test_x.py::test_y": "PASSED"}, MISSING, 1)
    reason = invalid_reason(rep, "without it")
    assert reason.startswith("canaries not collected without it although tests ran")
    assert "2 failed, 190 passed, 1 skipped in 0.97s; exit status 1" in reason
    assert "import" not in reason and "toolz/tests/test_a_b.py" in reason


def test_a_run_that_collected_nothing_says_so_with_the_error() -> None:
    rep = report(COLLECTION, {"toolz/tests/test_curried.py": "ERROR"}, MISSING, 2)
    reason = invalid_reason(rep, "with the gold patch")
    assert reason.startswith("tests not collected with the gold patch (1 error in 0.21s; "
                             "exit status 2)")
    assert "ImportError: broken" in reason


def test_misbehaving_canaries_and_other_invalid_runs() -> None:
    rep = report(RAN, {"a.py::t": "PASSED"}, {"p.py::test_c": "PASSED",
                                              "p.py::test_d": "PASSED"}, 0)
    assert "test_d PASSED" in invalid_reason(rep, "without it")
    other = GradingReport("x", statuses={"a.py::t": "PASSED", "a.py::u": "FAILED"}, exit_code=1)
    other.invalidate("JUnit and log disagree on ['a.py::t']", "report_mismatch")
    reason = invalid_reason(other, "without it")
    assert "1 failed, 1 passed; exit status 1" in reason and "JUnit and log disagree" in reason
    assert seen(GradingReport("x", exit_code=5)) == "no test; exit status 5"


def test_a_suite_whose_every_test_errors_is_named_for_it() -> None:
    log = ("ERROR tests/test_core.py::test_a - AssertionError: C extension not loaded\n"
           "=================== 48 skipped, 1721 errors in 36.66s ===================\n")
    rep = report(log, {"tests/test_core.py::test_a": "ERROR", "tests/test_b.py::t": "SKIPPED"},
                 {"tests/test_x_y.py::test_c": "ERROR", "tests/test_x_y.py::test_d": "ERROR"}, 1)
    reason = invalid_reason(rep, "without it")
    assert reason.startswith("every test errors without it, the canaries too (48 skipped, "
                             "1721 errors in 36.66s; exit status 1)")
    assert "C extension not loaded" in reason


# isodate's history: a 2015 setup.py that today's setuptools refuses
PIP_BUILD = """building repogym/repo:isodate-1 failed (1); its output ends:
  Getting requirements to build editable: finished with status 'error'
  error: subprocess-exited-with-error

  × Getting requirements to build editable did not run successfully.
  │ exit code: 1
  ╰─> [1 lines of output]
      error in isodate setup command: use_2to3 is invalid.
      [end of output]

  note: This error originates from a subprocess, and is likely not a problem with pip.
ERROR: Failed to build 'file:///testbed' when getting requirements to build editable
"""


def test_a_failed_build_is_said_with_what_the_build_backend_printed() -> None:
    """pip's own last lines say only that a subprocess failed; the reason names the cause."""
    from repogym.errors import SetupFailed
    from repogym.tasks.validate import error_reason

    reason = error_reason(SetupFailed(PIP_BUILD))
    assert reason.startswith("setup fails on this snapshot: ERROR: Failed to build")
    assert reason.endswith("error in isodate setup command: use_2to3 is invalid.")
    plain = error_reason(SetupFailed("its output ends:\nE: Unable to locate package foo"))
    assert plain == "setup fails on this snapshot: its output ends: | E: Unable to locate " \
                    "package foo"


SECTION = """==================================== ERRORS ====================================
___________ ERROR collecting src/isodate/tests/test_large_values.py ____________
src/isodate/tests/__init__.py:31: in <module>
    from isodate.tests import (test_date, test_time, test_datetime, test_duration,
src/isodate/tests/test_pickle.py:3: in <module>
    import six
E   ModuleNotFoundError: No module named 'six'
=========================== short test summary info ============================
ERROR src/isodate/tests/test_large_values.py
============================== 2 errors in 0.04s ===============================
"""


def test_tests_not_collected_name_pytests_error() -> None:
    """isodate's history: the run's last lines named the files, not why they did not import."""
    rep = report(SECTION, {"src/isodate/tests/test_large_values.py": "ERROR"}, MISSING, 1)
    reason = invalid_reason(rep, "without it")
    assert reason.startswith("tests not collected without it (2 errors in 0.04s")
    assert "src/isodate/tests/test_large_values.py: ModuleNotFoundError: No module named " \
           "'six'" in reason


def test_a_change_that_breaks_the_packages_import_is_a_task_as_a_build_failure_is() -> None:
    """voluptuous 0.16.0: a planted bug in a schema built at import made every test file fail
    to collect, the canaries' (inside the package) too; the candidate was rejected "tests not
    collected without it" where SWE-bench keeps it: every test errors before the fix."""
    from repogym.tasks.validate import collects_nothing, run_problem

    files = ["voluptuous/tests/tests.py", "voluptuous/tests/test_a_b.py"]
    broken = report(COLLECTION, {f: "ERROR" for f in files}, MISSING, 1)
    broken.collection_errors = list(files)
    fixed = GradingReport("x", patch_applied=True, statuses={
        "voluptuous/tests/tests.py::test_schema": "PASSED"}, exit_code=0)
    assert collects_nothing(broken)
    assert run_problem([broken, broken], [fixed, fixed]) is None
    # not when the gold side is no whole run either, nor when tests ran before the fix
    gold_broken = report(COLLECTION, {f: "ERROR" for f in files}, MISSING, 1)
    gold_broken.patch_applied = True
    assert (run_problem([broken], [gold_broken]) or "").startswith("tests not collected")
    ran = report(RAN, {"voluptuous/tests/tests.py::test_x": "FAILED"}, MISSING, 1)
    ran.collection_errors = [files[1]]
    assert not collects_nothing(ran)
    assert (run_problem([ran], [fixed]) or "").startswith("canaries not collected without it")
    timed = report(COLLECTION, {f: "ERROR" for f in files}, MISSING, 1)
    timed.collection_errors, timed.timed_out = list(files), True
    assert not collects_nothing(timed)
