"""Mocha and Vitest for real: a small repository of each, built (``npm install``) and graded in
Docker. The lists that the grader measures are the expected ones (the run takes the task's test
files), the canaries behave, and a package that prints the runner's pass lines for the hidden
tests is caught."""

from __future__ import annotations

import difflib
import json
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from repogym.envs.grading.grader import Grader, GraderConfig
from repogym.images.repository import ensure_image
from repogym.repo import snapshot_commit
from repogym.schema import Environment, Task
from repogym.tasks.validate import derive_lists

NPM_INSTALL = "npm install --no-audit --no-fund --loglevel=error"


def new_file(path: str, text: str) -> str:
    lines = text.splitlines(keepends=True)
    return (f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n"
            f"+++ b/{path}\n@@ -0,0 +1,{len(lines)} @@\n" + "".join("+" + x for x in lines))


def edit(path: str, old: str, new: str) -> str:
    body = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                f"a/{path}", f"b/{path}")
    return f"diff --git a/{path} b/{path}\n" + "".join(body)


MOCHA_SOURCE = """\
'use strict';

/** Splits text into lines of at most width characters, breaking at spaces. */
function wrap(text, width) {
  const lines = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line && line.length + word.length > width) {
      lines.push(line);
      line = word;
    } else {
      line = line ? line + ' ' + word : word;
    }
  }
  if (line) lines.push(line);
  return lines;
}

function title(text) {
  return text.replace(/\\b\\w/g, (c) => c.toUpperCase());
}

module.exports = { wrap, title };
"""
MOCHA = {
    "package.json": json.dumps({"name": "wrapkit", "version": "1.0.0", "private": True,
                                "main": "index.js", "scripts": {"test": "mocha"},
                                "devDependencies": {"mocha": "10.7.3"}}, indent=2) + "\n",
    ".gitignore": "node_modules/\n",
    "index.js": MOCHA_SOURCE,
    "test/title.js": """\
        const assert = require('assert');
        const { title } = require('..');

        describe('title', function () {
          it('capitalises every word', function () {
            assert.strictEqual(title('a tale of two'), 'A Tale Of Two');
          });
        });
        """,
}
MOCHA_TEST = """\
const assert = require('assert');
const { wrap } = require('..');

describe('wrap', function () {
  it('counts the space between words', function () {
    assert.deepStrictEqual(wrap('aaa bbb ccc', 6), ['aaa', 'bbb', 'ccc']);
  });

  it('keeps short text on one line', function () {
    assert.deepStrictEqual(wrap('one two', 20), ['one two']);
  });
});
"""
MOCHA_FIXED = MOCHA_SOURCE.replace("line.length + word.length > width",
                                   "line.length + 1 + word.length > width")

VITEST_SOURCE = """\
/** Limits x to [lo, hi]. */
export function clamp(x: number, lo: number, hi: number): number {
  return Math.max(lo, Math.min(x, lo));
}

export function lerp(a: number, b: number, t: number): number {
  return a + (b - a) * t;
}
"""
VITEST = {
    "package.json": json.dumps({"name": "clampkit", "version": "1.0.0", "private": True,
                                "type": "module", "scripts": {"test": "vitest run"},
                                "devDependencies": {"vitest": "1.6.0"}}, indent=2) + "\n",
    ".gitignore": "node_modules/\n",
    "src/clamp.ts": VITEST_SOURCE,
    "test/lerp.test.ts": """\
        import { describe, expect, test } from 'vitest';
        import { lerp } from '../src/clamp';

        describe('lerp', () => {
          test('halfway', () => {
            expect(lerp(0, 10, 0.5)).toBe(5);
          });
        });
        """,
}
VITEST_TEST = """\
import { describe, expect, test } from 'vitest';
import { clamp } from '../src/clamp';

describe('clamp', () => {
  test('keeps values inside', () => {
    expect(clamp(5, 0, 10)).toBe(5);
  });

  test('limits above', () => {
    expect(clamp(15, 0, 10)).toBe(10);
  });

  test('limits below', () => {
    expect(clamp(-3, 0, 10)).toBe(0);
  });
});
"""
VITEST_FIXED = VITEST_SOURCE.replace("Math.min(x, lo)", "Math.min(x, hi)")

@dataclass(frozen=True)
class Case:
    files: dict[str, str]
    language: str
    test: tuple[str, str]  # the hidden test file: path, text
    fix: tuple[str, str]  # the gold patch: path, fixed text
    f2p: list[str]
    p2p: list[str]
    forge: tuple[str, str]  # appended to a source file: it prints a pass line when loaded


CASES = {
    "mocha": Case(
        MOCHA, "javascript", ("test/wrap.js", MOCHA_TEST), ("index.js", MOCHA_FIXED),
        ["test/wrap.js > wrap > counts the space between words"],
        ["test/wrap.js > wrap > keeps short text on one line"],
        ("index.js", "process.stdout.write("
                     "'ok 1 test/wrap.js > wrap > counts the space between words\\n');\n")),
    "vitest": Case(
        VITEST, "typescript", ("test/clamp.test.ts", VITEST_TEST), ("src/clamp.ts", VITEST_FIXED),
        ["test/clamp.test.ts > clamp > keeps values inside",
         "test/clamp.test.ts > clamp > limits above"],
        ["test/clamp.test.ts > clamp > limits below"],
        ("src/clamp.ts", "process.stdout.write("
                         "' ✓ test/clamp.test.ts > clamp > limits above\\n');\n")),
}


def make_task(runner: str, root: Path, files: dict[str, str] | None = None) -> Task:
    case = CASES[runner]
    repo = root / runner
    for name, text in {**case.files, **(files or {})}.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    fix_path, fixed = case.fix
    return Task(
        instance_id=f"js__{runner}-1", repo=f"js/{runner}", base_commit=snapshot_commit(repo),
        problem_statement="fix it", patch=edit(fix_path, case.files[fix_path], fixed),
        test_patch=new_file(*case.test), source=str(repo),
        environment=Environment(language=case.language, runner=runner, setup=(NPM_INSTALL,),
                                timeout=180))


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.toolchain("javascript")
@pytest.mark.parametrize("runner", sorted(CASES))
def test_runner_grades_for_real(runner: str, toolchain: Callable[[str], str],
                                tmp_path: Path) -> None:
    toolchain("javascript")
    task = make_task(runner, tmp_path)
    grader = Grader(GraderConfig(cleanup_async=False))
    measured, reason = derive_lists(task, runs=1, grader=grader)
    assert measured is not None, reason
    case = CASES[runner]
    assert list(measured.FAIL_TO_PASS) == case.f2p
    assert list(measured.PASS_TO_PASS) == case.p2p

    path, line = case.forge
    forged = edit(path, case.files[path], case.files[path] + line)
    report = grader.grade(measured, forged, ensure_image(measured, lambda _m: None).tag)
    assert not report.resolved and "report_mismatch" in report.flags, (
        report.flags, report.invalid_reasons, report.log_tail[-2000:])


INDENT = """\
'use strict';

/** Puts n spaces before every line of text. */
module.exports = function indent(text, n) {
  return text.split('\\n').map((line) => ' '.repeat(n) + line).join('\\n');
};
"""
INDENT_TEST = """\
const assert = require('assert');
const indent = require('../lib/indent');

describe('indent', function () {
  it('indents every line', function () {
    assert.strictEqual(indent('a\\nb', 2), '  a\\n  b');
  });
});
"""


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.toolchain("javascript")
def test_mocha_tests_of_what_the_patch_adds(toolchain: Callable[[str], str],
                                             tmp_path: Path) -> None:
    """The hidden test requires a module the gold patch adds: before the patch mocha stops
    while loading it and reports no test (code that does not build, as a Go package), so its
    tests fail there and the task is kept."""
    toolchain("javascript")
    task = make_task("mocha", tmp_path)
    task = task.with_(patch=new_file("lib/indent.js", INDENT),
                      test_patch=new_file("test/indent.js", INDENT_TEST))
    measured, reason = derive_lists(task, runs=1, grader=Grader(GraderConfig(cleanup_async=False)))
    assert measured is not None, reason
    assert list(measured.FAIL_TO_PASS) == ["test/indent.js > indent > indents every line"]
    assert list(measured.PASS_TO_PASS) == []


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.toolchain("javascript")
def test_mocha_1_output_reaches_the_log(toolchain: Callable[[str], str], tmp_path: Path) -> None:
    """mocha 1's bin/mocha spawns _mocha with an option node has dropped (customFds), and the
    child's output was lost: every run then disagreed with its empty log (body-parser's 2014
    history pins mocha 1)."""
    toolchain("javascript")
    package = json.loads(MOCHA["package.json"])
    package["devDependencies"]["mocha"] = "1.20.1"
    task = make_task("mocha", tmp_path, {"package.json": json.dumps(package, indent=2) + "\n"})
    measured, reason = derive_lists(task, runs=1, grader=Grader(GraderConfig(cleanup_async=False)))
    assert measured is not None, reason
    assert list(measured.FAIL_TO_PASS) == CASES["mocha"].f2p
    assert list(measured.PASS_TO_PASS) == CASES["mocha"].p2p
