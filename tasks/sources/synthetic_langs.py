"""Synthetic tasks in Go, JavaScript, TypeScript, Rust and Java: a bug planted by rewriting one
token of one function (``mutate_ts``), as ``synthetic`` does for Python.

Each candidate is a commit of the working repository with one mutation; the task's patch
undoes it and the tests are the repository's own. Kept only if some test fails with the bug and
some test still passes (a bug that fails every test usually stops the code from building). The
problem statement names the failing tests and shows the end of their output, never the fix.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from repogym.envs.grading.grader import Grader, GraderConfig
from repogym.images.repository import ensure_image
from repogym.schema import Environment, Task

from . import mutate_ts
from .common import Deriver, Log, SourceOptions, WorkRepo, is_test_path, log_stderr
from .planted import FailureLog, PlantedBugSource
from .statement_model import ISSUE_SYSTEM, LLMConfig, statement
from .synthetic import _last_lines

# folders whose code the tests do not exercise as the library (or that are not the project's)
SKIP_DIRS = frozenset({"vendor", "node_modules", "examples", "example", "benches", "fuzz",
                       "testdata", "dist", "build", "target", "docs", "scripts"})


@dataclass(frozen=True)
class LangSyntheticOptions:
    path: Path
    rev: str = "HEAD"
    operators: tuple[str, ...] = mutate_ts.OPERATORS

    def __post_init__(self) -> None:
        unknown = [o for o in self.operators if o not in mutate_ts.OPERATORS]
        if unknown or not self.operators:
            raise ValueError(f"--operators {','.join(unknown) or '(none)'}: for this language "
                             f"use some of {','.join(mutate_ts.OPERATORS)}.")


def library_files(work: WorkRepo, language: str) -> dict[str, str]:
    """The language's non-test source files, outside vendored and example folders."""
    found = {}
    for path in work.files():
        parts = path.split("/")
        if (not mutate_ts.is_source(language, path) or is_test_path(path)
                or SKIP_DIRS & set(parts[:-1])):
            continue
        text = work.read_text(path)
        if text is not None:
            found[path] = text
    return found


def has_language_tests(work: WorkRepo, language: str) -> bool:
    return any(mutate_ts.is_source(language, p) and is_test_path(p) for p in work.files()) or (
        language == "rust" and any("#[test]" in (work.read_text(p) or "")
                                   for p in work.files() if p.endswith(".rs")))


def mutations(files: dict[str, str], language: str, operators: tuple[str, ...],
              seed: int) -> list[mutate_ts.Mutation]:
    """Mutations in the order they are tried: functions shuffled with the seed, then one
    mutation per function per round (operators shuffled within a function)."""
    rng = random.Random(seed)
    per_function = []
    for path, text in sorted(files.items()):
        for sites in mutate_ts.function_mutations(language, path, text, operators):
            rng.shuffle(sites)
            per_function.append(sites)
    rng.shuffle(per_function)
    rounds = max((len(s) for s in per_function), default=0)
    return [s[r] for r in range(rounds) for s in per_function if r < len(s)]


def grader_log_tail(task: Task) -> str:
    """The end of the tests' output on the buggy base (one run, no canaries)."""
    image = ensure_image(task, progress=lambda _m: None)
    report = Grader(GraderConfig(cleanup_async=False, canaries=False)).grade(task, "", image.tag)
    return report.log_tail


def failure_statement(failing: tuple[str, ...], log: str) -> str:
    parts = ["Something in the library is broken: these tests fail, and they passed before.\n",
             "\n".join(f"- `{name}`" for name in failing[:20])]
    if len(failing) > 20:
        parts.append(f"- ... and {len(failing) - 20} more")
    if log:
        parts.append(f"\nWhat the test run printed last:\n\n```\n{_last_lines(log, 2500)}\n```")
    parts.append("\nFind the cause in the library code and fix it. The tests are right; do not "
                 "change them.")
    return "\n".join(parts)


class LangSyntheticSource(PlantedBugSource[mutate_ts.Mutation]):
    """Planted-bug candidates in another language (see the module docstring)."""

    stops = "build"

    def __init__(self, work: WorkRepo, options: LangSyntheticOptions, common: SourceOptions,
                 environment: Environment, llm: LLMConfig | None = None,
                 derive: Deriver | None = None, log: Log = log_stderr,
                 failure_log: FailureLog | None = None) -> None:
        super().__init__(work, common, environment, llm, derive, log,
                         failure_log or grader_log_tail)
        self.options = options
        self.language = environment.language
        self.library = library_files(work, self.language)

    def mutations(self) -> list[mutate_ts.Mutation]:
        return mutations(self.library, self.language, self.options.operators, self.common.seed)

    def materialize(self, mutation: mutate_ts.Mutation) -> Task | None:
        buggy = mutate_ts.verify(self.language, self.library[mutation.file], mutation)
        if buggy is None:
            return None
        return self.planted(mutation, buggy, extra={"function": mutation.qualname,
                                                    "file": mutation.file})

    def check(self, task: Task) -> tuple[Task | None, str]:
        done, reason = self.derived(task)
        if done is None:
            return None, reason
        fallback = failure_statement(done.FAIL_TO_PASS, self.test_output(done))
        prompt = ("Write a bug report from these failing tests. Describe the wrong behaviour "
                  "a user would see; do not guess where the defect is.\n\n" + fallback)
        text = statement(self.llm, ISSUE_SYSTEM, prompt, fallback, self.log)
        return done.with_(problem_statement=text), reason
