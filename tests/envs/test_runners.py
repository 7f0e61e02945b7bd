"""Language runners without Docker: result parsing, the cross-check, canaries, protection."""

from __future__ import annotations

import json
import random

import pytest

from repogym.envs.grading.langrun import cross_check, every_status, with_log_keys
from repogym.envs.grading.protect_langs import config_changed, protected_reason
from repogym.envs.grading.results import parse_log
from repogym.envs.grading.runners import RUNNERS, get_runner, runner_name
from repogym.envs.grading.runners.language import conflicts
from repogym.errors import TaskError
from repogym.images.toolchains import TOOLCHAINS, dockerfile
from repogym.schema import Environment, Task


def test_runner_comes_from_the_name_or_the_language() -> None:
    assert runner_name(Environment()) is None
    assert runner_name(Environment(language="go")) == "gotest"
    assert runner_name(Environment(language="javascript", runner="mocha")) == "mocha"
    with pytest.raises(ValueError, match="unknown test runner"):
        get_runner("nope")
    with pytest.raises(TaskError, match="language"):
        Environment(language="cobol")


def test_python_tasks_serialise_as_before() -> None:
    task = Task("x-1", "x", "0" * 40, "p")
    assert "language" not in task.to_dict()["environment"]
    go = task.with_(environment=Environment(language="go"))
    assert go.to_dict()["environment"]["language"] == "go"


JEST = {"testResults": [{"name": "/testbed/test/a.test.js", "status": "failed",
                         "assertionResults": [
                             {"ancestorTitles": ["parse"], "title": "reads", "status": "passed"},
                             {"ancestorTitles": [], "title": "breaks", "status": "failed"},
                             {"ancestorTitles": [], "title": "later", "status": "pending"}]}]}
JEST_LOG = "  parse\n    ✓ reads (3 ms)\n  ✕ breaks (1 ms)\n  ○ skipped later\n"


def test_jest_results_and_log_agree() -> None:
    runner = get_runner("jest")
    machine = runner.parse({"jest.json": json.dumps(JEST)}, "")
    assert machine == {"test/a.test.js > parse > reads": "PASSED",
                       "test/a.test.js > breaks": "FAILED", "test/a.test.js > later": "SKIPPED"}
    log = parse_log(JEST_LOG, runner.log_parser)
    assert cross_check(machine, log, list(machine), runner) == []
    forged = parse_log(JEST_LOG + "✓ breaks\n", runner.log_parser)
    assert cross_check(machine, forged, list(machine), runner) == ["breaks"]
    assert with_log_keys(machine, runner)["reads"] == "PASSED"


def test_vitest_file_suite_is_no_title() -> None:
    runner = get_runner("vitest")
    data = {"testResults": [{"name": "/testbed/test/a.test.ts", "assertionResults": [
        {"ancestorTitles": ["", "clamp"], "title": "limits", "status": "passed"}]}]}
    machine = runner.parse({"vitest.json": json.dumps(data)}, "")
    assert machine == {"test/a.test.ts > clamp > limits": "PASSED"}
    log = parse_log(" ✓ test/a.test.ts > clamp > limits 2ms\n", runner.log_parser)
    assert cross_check(machine, log, list(machine), runner) == []


def test_mocha_reporter_output() -> None:
    runner = get_runner("mocha")
    rows = [{"id": "test/a.js > json > parses", "status": "PASSED"},
            {"id": "test/a.js > json > fails", "status": "FAILED"}]
    machine = runner.parse({"mocha.json": json.dumps({"results": rows})}, "")
    log = parse_log("ok 1 test/a.js > json > parses\nnot ok 2 test/a.js > json > fails\n",
                    runner.log_parser)
    assert cross_check(machine, log, list(machine), runner) == []
    assert runner.exit_problem(0, machine) and runner.exit_problem(1, machine) is None


# node's own report when a test file requires what the patch adds (mocha prints it and stops)
MOCHA_LOAD_FAILURE = """\
Error: Cannot find module '../lib/read'
Require stack:
- /testbed/test/utils.js
- /testbed/test/json.js
    at Module._resolveFilename (node:internal/modules/cjs/loader:1207:15)
    at Object.<anonymous> (/testbed/test/utils.js:4:12)
    at Module._compile (node:internal/modules/cjs/loader:1521:14) {
  code: 'MODULE_NOT_FOUND',
"""


def test_mocha_load_failure_is_code_that_does_not_build() -> None:
    runner = get_runner("mocha")
    assert runner.built(MOCHA_LOAD_FAILURE, {}) is False
    assert runner.built("ok 1 test/a.js > json > parses\n", {"test/a.js > json > parses": "PASSED"})
    # an error inside mocha itself, or no output at all: nothing to say about the code
    inside = MOCHA_LOAD_FAILURE.replace("/testbed/test/", "/testbed/node_modules/mocha/lib/")
    assert runner.built(inside, {}) is None and runner.built("", {}) is None


def test_go_events_and_forged_lines() -> None:
    runner = get_runner("gotest")
    events = [{"Action": "run", "Test": "TestA"},
              {"Action": "output", "Test": "TestA", "Output": "--- PASS: TestA (0.00s)\n"},
              {"Action": "pass", "Test": "TestA"},
              {"Action": "output", "Test": "TestB", "Output": "--- FAIL: TestB (0.00s)\n"},
              {"Action": "fail", "Test": "TestB"}]
    machine = runner.parse({"go.json": "\n".join(json.dumps(e) for e in events)}, "")
    assert machine == {"TestA": "PASSED", "TestB": "FAILED"}
    log = "--- PASS: TestA (0.00s)\n--- FAIL: TestB (0.00s)\n"
    assert cross_check(machine, parse_log(log, "gotest"), [], runner) == []
    # a test binary that prints a pass line for TestB is caught
    forged = log + "--- PASS: TestB (0.00s)\n"
    assert cross_check(machine, parse_log(forged, "gotest"), [], runner) == ["TestB"]
    # printed when the package loads, before the real result: the parser keeps the last line,
    # every_status keeps them all
    early = "--- PASS: TestB (0.00s)\n" + log
    assert cross_check(machine, parse_log(early, "gotest"), [], runner) == []
    assert cross_check(machine, parse_log(early, "gotest"), [], runner,
                       every_status(early, "gotest")) == ["TestB"]
    assert cross_check(machine, parse_log(log, "gotest"), [], runner,
                       every_status(log, "gotest")) == []


def test_go_pass_printed_before_the_framing_is_a_conflict() -> None:
    runner = get_runner("gotest")
    # what test2json makes of a package that prints a pass line when it loads
    events = [{"Action": "pass", "Package": "x", "Test": "TestB"},
              {"Action": "run", "Package": "x", "Test": "TestB"},
              {"Action": "fail", "Package": "x", "Test": "TestB"},
              {"Action": "pass", "Package": "y", "Test": "TestB"}]
    machine = runner.parse({"go.json": "\n".join(json.dumps(e) for e in events)}, "")
    assert machine == {"TestB": "FAILED"} and conflicts(machine) == {"TestB"}
    honest = runner.parse({"go.json": "\n".join(json.dumps(e) for e in events[1:])}, "")
    assert conflicts(honest) == set()  # one ending per package


def test_cargo_logfiles() -> None:
    runner = get_runner("cargo")
    machine = runner.parse({"cargo/a-1.log": "ok tests::one\nfailed two\nignored three\n",
                            "cargo/b-2.log": "ok two\n"}, "")
    assert machine == {"tests::one": "PASSED", "two": "FAILED", "three": "SKIPPED"}
    log = "test tests::one ... ok\ntest two ... FAILED\ntest two ... ok\ntest three ... ignored\n"
    assert cross_check(machine, parse_log(log, "cargo"), [], runner) == []


def test_cargo_should_panic_tests_are_read_from_the_log() -> None:
    """libtest prints a #[should_panic] test as "test NAME - should panic ... ok", which
    swebench's cargo parser does not read: the two sources disagreed on every such test
    (bluss/arrayvec: each of its candidates was an invalid run)."""
    runner = get_runner("cargo")
    machine = runner.parse({"cargo/t-1.log": "ok drain_oob\nfailed insert_oob\nok plain\n"}, "")
    log = ("test drain_oob - should panic ... ok\ntest insert_oob - should panic ... FAILED\n"
           "test plain ... ok\n")
    assert parse_log(log, "cargo") == {"drain_oob": "PASSED", "insert_oob": "FAILED",
                                       "plain": "PASSED"}
    assert cross_check(machine, parse_log(log, "cargo"), ["drain_oob"], runner,
                       every_status(log, "cargo")) == []


def test_cargo_logfile_records_with_messages() -> None:
    """libtest 1.63's logfile as it is for a should_panic test that did not panic, one whose
    panic lacked the expected text (a record over three lines) and an ignore with a reason:
    the message comes before the name."""
    runner = get_runner("cargo")
    text = ("ignored: slow one ignored_why\nfailed: test did not panic as expected no_panic\n"
            "ok plain\nok right_message\nfailed: panic did not contain expected string\n"
            "      panic message: `\"xyz\\nsecond line\"`,\n"
            " expected substring: `\"abc\"` wrong_message\n")
    machine = runner.parse({"cargo/t-1.log": text}, "")
    assert machine == {"ignored_why": "SKIPPED", "no_panic": "FAILED", "plain": "PASSED",
                       "right_message": "PASSED", "wrong_message": "FAILED"}
    log = ("test ignored_why ... ignored, slow one\ntest no_panic - should panic ... FAILED\n"
           "test plain ... ok\ntest right_message - should panic ... ok\n"
           "test wrong_message - should panic ... FAILED\n")
    assert cross_check(machine, parse_log(log, "cargo"), ["plain"], runner,
                       every_status(log, "cargo")) == []


def test_junit_reports() -> None:
    runner = get_runner("junit")
    xml = ("<testsuite><testcase classname='demo.ATest' name='one()'/>"
           "<testcase classname='demo.ATest' name='two'><failure/></testcase></testsuite>")
    machine = runner.parse({"junit/TEST-junit-jupiter.xml": xml}, "")
    assert machine == {"demo.ATest#one": "PASSED", "demo.ATest#two": "FAILED"}
    log = "[junit] [PASS] demo.ATest#one\n[junit] [FAIL] demo.ATest#two\n"
    assert cross_check(machine, parse_log(log, "ant"), [], runner) == []


@pytest.mark.parametrize("name", sorted(RUNNERS))
def test_canaries_are_named_like_the_tests(name: str) -> None:
    files = {"jest": ["test/query.test.js"], "vitest": ["src/a.spec.ts"],
             "mocha": ["test/json.js"], "gotest": ["pkg/x_test.go"],
             "cargo": ["tests/encode.rs"], "junit": ["src/test/java/demo/ATest.java"]}[name]
    canary = get_runner(name).canary(files, random.Random(1))
    assert canary.path.rpartition("/")[0] == files[0].rpartition("/")[0]
    assert canary.path != files[0] and sorted(set(canary.ids.values())) == ["FAILED", "PASSED"]


@pytest.mark.parametrize(("language", "path", "reason"), [
    ("javascript", "test/a.js", "test_path"), ("javascript", "src/a.test.ts", "test_file"),
    ("javascript", "jest.config.js", "runner_config"), ("javascript", ".mocharc.yml",
                                                        "runner_config"),
    ("javascript", "node_modules/x/index.js", "dependencies"), ("javascript", "src/a.js", None),
    ("go", "uuid_test.go", "test_file"), ("go", "testdata/x.json", "test_path"),
    ("go", "uuid.go", None), ("rust", "tests/a.rs", "test_path"), ("rust", "build.rs",
                                                                  "runner_config"),
    ("rust", ".cargo/config.toml", "runner_config"), ("rust", "src/lib.rs", None),
    ("java", "src/test/java/a/BTest.java", "test_path"),
    ("java", "src/main/resources/META-INF/services/org.junit.platform.launcher."
             "TestExecutionListener", "runner_config"),
    ("java", "src/main/resources/junit-platform.properties", "runner_config"),
    ("java", "src/main/java/a/B.java", None),
])
def test_protected_paths(language: str, path: str, reason: str | None) -> None:
    assert protected_reason(path, language) == reason


def test_build_files_are_judged_by_content() -> None:
    pkg = '{"name": "x", "version": "1.0.0", "scripts": {"test": "jest"}}'
    assert not config_changed("package.json", pkg, pkg.replace("1.0.0", "1.0.1"))
    assert config_changed("package.json", pkg, pkg.replace('"jest"', '"true"'))
    mod = "module x\n\ngo 1.21\n"
    assert config_changed("go.mod", mod, mod + "replace y => ./y\n")
    cargo = '[package]\nname = "x"\nversion = "0.1.0"\n'
    assert not config_changed("Cargo.toml", cargo, cargo.replace("0.1.0", "0.2.0"))
    assert config_changed("Cargo.toml", cargo, cargo + "[profile.test]\nopt-level = 3\n")
    assert config_changed("Cargo.toml", cargo, cargo.replace('version', 'build = "b.rs"\nversion'))
    pom = "<project><dependencies></dependencies></project>"
    skip = pom.replace("<dependencies>", "<properties><skipTests>true</skipTests></properties>"
                       "<dependencies>")
    assert config_changed("pom.xml", pom, skip)


@pytest.mark.parametrize("language", sorted(TOOLCHAINS))
def test_toolchain_recipes_install_debian_packages(language: str) -> None:
    chain = TOOLCHAINS[language]
    text = dockerfile(chain, "repogym/base:x")
    assert text.startswith("FROM repogym/base:x") and all(p in text for p in chain.packages)
    assert "core.excludesFile" in text  # dependencies and build output never enter a diff
