"""The two result sources and how they are compared."""

from repogym.envs.grading.results import disagreements, parse_junit, parse_log

JUNIT = """<?xml version="1.0"?><testsuites><testsuite>
<testcase classname="tests.test_a" file="tests/test_a.py" name="test_ok"/>
<testcase classname="tests.test_a.TestK" file="tests/test_a.py" name="test_m"><failure/></testcase>
<testcase classname="tests.test_a" file="tests/test_a.py" name="test_p[a b]"/>
<testcase classname="tests.test_a" file="tests/test_a.py" name="test_s"><skipped/></testcase>
</testsuite></testsuites>"""

LOG = """PASSED tests/test_a.py::test_ok
FAILED tests/test_a.py::TestK::test_m - assert 1 == 2
PASSED tests/test_a.py::test_p[a b]
SKIPPED [1] tests/test_a.py:9: no reason
"""


def test_junit_ids_match_pytest_node_ids() -> None:
    assert parse_junit(JUNIT) == {
        "tests/test_a.py::test_ok": "PASSED",
        "tests/test_a.py::TestK::test_m": "FAILED",
        "tests/test_a.py::test_p[a b]": "PASSED",
        "tests/test_a.py::test_s": "SKIPPED",
    }


def test_sources_agree_including_ids_with_spaces() -> None:
    junit, log = parse_junit(JUNIT), parse_log(LOG, "pytest")
    ids = ["tests/test_a.py::test_ok", "tests/test_a.py::TestK::test_m",
           "tests/test_a.py::test_p[a b]"]
    assert disagreements(junit, log, ids) == []


def test_a_forged_log_line_disagrees() -> None:
    junit = parse_junit(JUNIT)
    log = parse_log(LOG.replace("FAILED tests/test_a.py::TestK::test_m - assert 1 == 2",
                                "PASSED tests/test_a.py::TestK::test_m"), "pytest")
    assert disagreements(junit, log, ["tests/test_a.py::TestK::test_m"]) == [
        "tests/test_a.py::TestK::test_m"]
