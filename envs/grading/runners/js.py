"""Mocha, Jest and Vitest, with the project's own copy of the runner (``node_modules``).

Test ids are ``<file> > <describe>... > <title>``. Machine-readable results: Jest's and
Vitest's ``--json``/json reporter file, and for Mocha repogym's reporter
(``/opt/repogym/mocha-reporter.js``), which writes a JSON file and TAP lines. The console log is
read by swebench's ``parse_log_jest`` (titles only), ``parse_log_vitest`` and ``parse_log_tap``.
"""

from __future__ import annotations

import json
import posixpath
import random
import re
import shlex
from typing import Any

from repogym.schema import Environment

from .language import OUT, Canary, Results, camel, invocation, merge, plain_exit, put, words

SEP = " > "
# Node's report of an exception thrown while a test file loads: the error line, then its stack
# or require stack through a repository file (node_modules is the runner's, not the code's)
_LOAD_ERROR = re.compile(r"^(?:[A-Z]\w*Error\b|Error \[\w+\])|\bMODULE_NOT_FOUND\b", re.M)
_REPO_FRAME = re.compile(r"^\s*(?:at .*?|- )/testbed/(?!node_modules/)\S", re.M)


def _ext(files: list[str], default: str) -> str:
    """The test-file suffix the repository uses (``.test.js``, ``.spec.ts``...)."""
    for f in files:
        name = posixpath.basename(f)
        for suffix in (".test.", ".spec.", "_test.", "-test."):
            if suffix in name:
                return suffix + name.rsplit(suffix, 1)[1]
        if "." in name:
            return "." + name.split(".", 1)[1]
    return default


def _path(files: list[str], rng: random.Random, default_dir: str, default_ext: str) -> tuple[
        str, list[str]]:
    folder = posixpath.dirname(files[0]) if files else default_dir
    a, b = words(rng)
    sep = "-" if any("-" in posixpath.basename(f) for f in files) else "_"
    return posixpath.join(folder, f"{a}{sep}{b}{_ext(files, default_ext)}"), [a, b]


def _titles(rng: random.Random) -> tuple[str, str, int]:
    x, y = words(rng)
    return f"handles {x}", f"keeps {y}", rng.randint(3, 97)


def _jest_like(data: dict[str, Any], root: str = "/testbed") -> dict[str, str]:
    statuses: dict[str, str] = Results()
    for suite in data.get("testResults", []):
        file = posixpath.relpath(suite.get("name") or suite.get("testFilePath") or "", root)
        cases = suite.get("assertionResults") or suite.get("testResults") or []
        if not cases and suite.get("status") == "failed":
            merge(statuses, file, "ERROR")  # the file did not load
        for case in cases:
            # vitest's file-level suite is an empty ancestor title
            titles = [t for t in case.get("ancestorTitles", []) if t]
            test_id = SEP.join([file, *titles, case.get("title", "")])
            status = {"passed": "PASSED", "failed": "FAILED"}.get(case.get("status"), "SKIPPED")
            merge(statuses, test_id, status)
    return statuses


def _load(text: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _two_tests(good: str, bad: str, n: int) -> str:
    """A canary test that must pass (``good``) and one that must fail (``bad``), in Jest's and
    Vitest's shared ``test(title, fn)`` form."""
    return (f"test('{good}', () => {{\n  let s = 0;\n  for (let i = 0; i < {n}; i++) s += i;\n"
            f"  if (s !== {n * (n - 1) // 2}) throw new Error('sum');\n}});\n\n"
            f"test('{bad}', () => {{\n  const a = [{n}, 1].sort((x, y) => x - y);\n"
            f"  if (a[0] !== {n}) throw new Error('order ' + a);\n}});\n")


class Jest:
    name = "jest"
    log_parser = "jest"
    default_cmd = "node_modules/.bin/jest"

    def command(self, env: Environment, files: list[str]) -> str:
        cmd = invocation(env, self.default_cmd)
        return (f"{cmd} --ci --verbose --colors=false --watchman=false --json "
                f"--outputFile={OUT}/jest.json --runTestsByPath {shlex.join(files)}")

    def parse(self, outputs: dict[str, str], log: str) -> dict[str, str]:
        return _jest_like(_load(outputs.get("jest.json", "")))

    def log_key(self, test_id: str) -> str:
        return test_id.rsplit(SEP, 1)[-1]

    def canary(self, test_files: list[str], rng: random.Random) -> Canary:
        path, _ = _path(test_files, rng, "test", ".test.js")
        good, bad, n = _titles(rng)
        worse = f"rejects {words(rng, 1)[0]}"
        # two that must fail: a plain throw, and jest's own expect (which code under test
        # could replace with one that accepts everything)
        # Jest gives every test file its own globals and modules: the canary loads the
        # package too, so whatever loading it does to the tests' world it does to the canary's
        root = posixpath.relpath(".", posixpath.dirname(path) or ".")
        text = (f"try {{ require({json.dumps(root)}); }} catch (e) {{}}\n\n"
                + _two_tests(good, bad, n)
                + f"\ntest('{worse}', () => {{\n  expect([{n}, 1].sort((x, y) => x - y)[0])"
                f".toBe({n});\n}});\n")
        return Canary(path, put(path, text), {f"{path}{SEP}{good}": "PASSED",
                                              f"{path}{SEP}{bad}": "FAILED",
                                              f"{path}{SEP}{worse}": "FAILED"})

    def exit_problem(self, code: int, statuses: dict[str, str]) -> str | None:
        return plain_exit(code, statuses)

    def built(self, log: str, statuses: dict[str, str]) -> bool | None:
        return None


class Vitest(Jest):
    name = "vitest"
    log_parser = "vitest"
    default_cmd = "node_modules/.bin/vitest run"

    def command(self, env: Environment, files: list[str]) -> str:
        cmd = invocation(env, self.default_cmd)
        return (f"NO_COLOR=1 {cmd} --reporter=verbose --reporter=json "
                f"--outputFile={OUT}/vitest.json --watch=false {shlex.join(files)}")

    def parse(self, outputs: dict[str, str], log: str) -> dict[str, str]:
        return _jest_like(_load(outputs.get("vitest.json", "")))

    def log_key(self, test_id: str) -> str:
        return test_id

    def canary(self, test_files: list[str], rng: random.Random) -> Canary:
        path, _ = _path(test_files, rng, "test", ".test.js")
        good, bad, n = _titles(rng)
        text = "import { test } from 'vitest';\n\n" + _two_tests(good, bad, n)
        return Canary(path, put(path, text), {f"{path}{SEP}{good}": "PASSED",
                                              f"{path}{SEP}{bad}": "FAILED"})


class Mocha(Jest):
    name = "mocha"
    log_parser = "tap"
    default_cmd = "node_modules/.bin/mocha"

    def command(self, env: Environment, files: list[str]) -> str:
        cmd = invocation(env, self.default_cmd)
        pick = ""
        if cmd.split(" ", 1)[0] == self.default_cmd:
            # mocha 1's bin/mocha runs bin/_mocha with spawn's customFds, which node no longer
            # knows: the child's output is lost (TAP lines and all); _mocha runs in-process
            pick = ("__rg_mocha=node_modules/.bin/mocha; grep -qs customFds "
                    "node_modules/mocha/bin/mocha && __rg_mocha=node_modules/.bin/_mocha; ")
            cmd = "$__rg_mocha" + cmd[len(self.default_cmd):]
        return (f"{pick}REPOGYM_RESULTS={OUT}/mocha.json REPOGYM_ROOT=/testbed {cmd} --no-color "
                f"--reporter /opt/repogym/mocha-reporter.js -- {shlex.join(files)}")

    def parse(self, outputs: dict[str, str], log: str) -> dict[str, str]:
        statuses: dict[str, str] = Results()
        for row in _load(outputs.get("mocha.json", "")).get("results", []):
            if isinstance(row, dict):
                merge(statuses, str(row.get("id")), str(row.get("status")))
        return statuses

    def log_key(self, test_id: str) -> str:
        return test_id

    def canary(self, test_files: list[str], rng: random.Random) -> Canary:
        path, parts = _path(test_files, rng, "test", ".js")
        good, bad, n = _titles(rng)
        suite = " ".join(parts)
        text = (f"describe('{suite}', function () {{\n"
                f"  it('{good}', function () {{\n    let s = 0;\n"
                f"    for (let i = 0; i < {n}; i++) s += i;\n"
                f"    if (s !== {n * (n - 1) // 2}) throw new Error('sum');\n  }});\n\n"
                f"  it('{bad}', function () {{\n    const a = [{n}, 1].sort((x, y) => x - y);\n"
                f"    if (a[0] !== {n}) throw new Error('order ' + a);\n  }});\n}});\n")
        return Canary(path, put(path, text), {f"{path}{SEP}{suite}{SEP}{good}": "PASSED",
                                              f"{path}{SEP}{suite}{SEP}{bad}": "FAILED"})

    def built(self, log: str, statuses: dict[str, str]) -> bool | None:
        """Mocha loads every test file in one process before it runs any: a file that throws
        while loading (a test that requires what the patch adds) stops the run with no test
        reported, so every test of the run fails there, as a Go package that does not build."""
        if statuses:
            return True
        if _LOAD_ERROR.search(log) and _REPO_FRAME.search(log):
            return False
        return None

    def exit_problem(self, code: int, statuses: dict[str, str]) -> str | None:
        # mocha exits with the number of failures (at most 255)
        failing = sum(s in ("FAILED", "ERROR") for s in statuses.values())
        if statuses and code != min(failing, 255):
            return f"mocha exited {code} but {failing} tests failed"
        return None


__all__ = ["Jest", "Mocha", "Vitest", "camel"]
