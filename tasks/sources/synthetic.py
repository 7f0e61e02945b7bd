"""Synthetic tasks: a bug planted by a small AST rewrite of one function.

Each candidate is a new commit in which one mutation (see ``mutate.OPERATORS``) is applied to
one function, editing only the mutated span so the rest of the file stays byte-identical. The
task's patch is the fix; the tests are the repository's own. A bug is kept only if it breaks at
least one test and some test still passes with it (a bug that fails every test usually means
the package no longer imports). The problem statement describes the failing tests, never the
fix; the function's original source is the reference for the similarity reward.
"""

from __future__ import annotations

import ast
import random
import re
from dataclasses import dataclass
from pathlib import Path

from repogym.envs.grading.grader import Grader, GraderConfig
from repogym.images.repository import ensure_image
from repogym.schema import Environment, Reference, Task

from . import mutate, pyast, statements
from .common import Deriver, Log, SourceOptions, WorkRepo, is_test_path, log_stderr
from .planted import FailureLog, PlantedBugSource
from .statement_model import LLMConfig

MAX_SNIPPETS = 3
MAX_SNIPPET_LINES = 40


@dataclass(frozen=True)
class SyntheticOptions:
    path: Path  # a git repository, bundle or plain folder
    rev: str = "HEAD"  # the commit the bugs are planted in
    operators: tuple[str, ...] = tuple(mutate.OPERATORS)  # which rewrites to use

    def __post_init__(self) -> None:
        unknown = [o for o in self.operators if o not in mutate.OPERATORS]
        if unknown or not self.operators:
            raise ValueError(f"--operators {','.join(unknown) or '(none)'}: use some of "
                             f"{','.join(mutate.OPERATORS)}.")


def _mixed(found: list[mutate.Mutation], rng: random.Random) -> list[mutate.Mutation]:
    """One function's mutations shuffled, then taken one operator at a time: a function with
    many call sites must not yield only swapped arguments."""
    groups: dict[str, list[mutate.Mutation]] = {}
    for mutation in found:
        groups.setdefault(mutation.operator, []).append(mutation)
    order = sorted(groups)
    rng.shuffle(order)
    for name in order:
        rng.shuffle(groups[name])
    longest = max(len(g) for g in groups.values())
    return [groups[n][i] for i in range(longest) for n in order if i < len(groups[n])]


def mutations(files: dict[str, str], operators: tuple[str, ...], seed: int,
              priority: set[str] | None = None) -> list[mutate.Mutation]:
    """Every proposed mutation of ``files`` in the order they are tried: functions shuffled
    with the seed (those named in ``priority`` first), then one mutation per function per
    round, so a few big functions do not take every slot; within a function, operators take
    turns."""
    rng = random.Random(seed)
    per_function: list[list[mutate.Mutation]] = []
    for path, text in sorted(files.items()):
        try:
            module = pyast.parse(text)
        except SyntaxError:
            continue
        for definition in pyast.definitions(module):
            if isinstance(definition.node, ast.ClassDef):
                continue
            found = mutate.function_mutations(path, text, definition, operators)
            if found:
                per_function.append(_mixed(found, rng))
    rng.shuffle(per_function)
    wanted = priority or set()
    per_function.sort(key=lambda ms: ms[0].qualname.rsplit(".", 1)[-1] not in wanted)
    rounds = max((len(ms) for ms in per_function), default=0)
    return [ms[r] for r in range(rounds) for ms in per_function if r < len(ms)]


def _test_source(files: dict[str, str], test_id: str) -> str | None:
    """The source of a test named like ``path::Class::test[param]``, if it can be found."""
    path, _, rest = test_id.partition("::")
    text = files.get(path)
    if text is None or not rest:
        return None
    qualname = re.sub(r"\[.*\]$", "", rest).replace("::", ".")
    try:
        node = pyast.find(pyast.parse(text), qualname)
    except (SyntaxError, KeyError):
        return None
    lines = pyast.source_of(pyast.Source(text), node).splitlines()
    if len(lines) > MAX_SNIPPET_LINES:
        lines = lines[:MAX_SNIPPET_LINES] + ["    ..."]
    return "\n".join(lines)


_SUMMARY = re.compile(r"(FAILED|ERROR) (\S+)(?: - (.*))?$")
_SECTION = re.compile(r"^_{3,} (.+?) _{3,}$")
MAX_MESSAGE = 300  # characters of one test's message


def failure_summary(log: str, failing: tuple[str, ...]) -> str:
    """One line per test in ``failing``: ``FAILED id - message``, the message whole.

    pytest cuts the messages of its short summary to the terminal's width, mid-word
    (``AssertionE...``); the first ``E`` line of the test's own failure section says it in
    full, and is used when the log holds it. Otherwise the cut message loses its broken word.
    """
    wanted, errors = set(failing), _first_error_lines(log)
    lines = []
    for line in log.splitlines():
        m = _SUMMARY.match(line)
        if not m or m.group(2) not in wanted:
            continue
        test = m.group(2)
        title = test.split("::", 1)[1].replace("::", ".") if "::" in test else test
        message = errors.get(title) or _whole_words(m.group(3) or "")
        lines.append(f"{m.group(1)} {test}" + (f" - {_shorten(message)}" if message else ""))
    return "\n".join(lines)


def _first_error_lines(log: str) -> dict[str, str]:
    """The first ``E   ...`` line of each failure section, by the section's title
    (``test_x``, ``TestK.test_b[1]``)."""
    found: dict[str, str] = {}
    title = None
    for line in log.splitlines():
        header = _SECTION.match(line)
        if header:
            title = header.group(1)
        elif title and title not in found and line.startswith("E ") and line[1:].strip():
            found[title] = line[1:].strip()
    return found


def _whole_words(message: str) -> str:
    """A message pytest cut (it ends with ``...``) without the word it cut in two."""
    if not message.endswith("..."):
        return message
    kept = message[:-3].rstrip()
    return (kept.rsplit(" ", 1)[0] if " " in kept else kept) + " ..."


def _shorten(message: str) -> str:
    if len(message) <= MAX_MESSAGE:
        return message
    return message[:MAX_MESSAGE].rsplit(" ", 1)[0] + " ..."


def grader_failure_log(task: Task) -> str:
    """What the failing tests report on the buggy base: one run in the task's image, with
    the grader the environment uses (no canaries, so only the repository's tests show)."""
    image = ensure_image(task, progress=lambda _m: None)
    report = Grader(GraderConfig(cleanup_async=False, canaries=False)).grade(task, "", image.tag)
    return failure_summary(report.log_tail, task.FAIL_TO_PASS)


def failure_statement(failing: tuple[str, ...], files: dict[str, str], log: str = "") -> str:
    """An issue built from what fails: the test names, their code, and test output if any."""
    parts = ["Something in the library is broken: these tests fail, and they passed before.\n",
             "\n".join(f"- `{name}`" for name in failing[:20])]
    if len(failing) > 20:
        parts.append(f"- ... and {len(failing) - 20} more")
    snippets = [(name, code) for name in failing[:MAX_SNIPPETS]
                if (code := _test_source(files, name))]
    for name, code in snippets:
        parts.append(f"\n`{name}`:\n\n```python\n{code}\n```")
    if log:
        parts.append(f"\nWhat they report:\n\n```\n{_last_lines(log, 3000)}\n```")
    parts.append("\nFind the cause in the library code and fix it. The tests are right; do not "
                 "change them.")
    return "\n".join(parts)


def _last_lines(text: str, limit: int) -> str:
    """The end of ``text``, at most ``limit`` characters, starting at a line's start."""
    if len(text) <= limit:
        return text
    tail = text[-limit:]
    return tail.split("\n", 1)[1] if "\n" in tail else tail


def _reference(file: str, qualname: str, occurrence: int, source: str) -> Reference:
    ref: Reference = {"file": file, "qualname": qualname, "granularity": "function",
                      "source": source}
    if occurrence:
        ref["occurrence"] = occurrence
    return ref


class SyntheticSource(PlantedBugSource[mutate.Mutation]):
    """Planted-bug candidates from a working repository (see the module docstring)."""

    def __init__(self, work: WorkRepo, options: SyntheticOptions, common: SourceOptions,
                 environment: Environment, llm: LLMConfig | None = None,
                 derive: Deriver | None = None, log: Log = log_stderr,
                 failure_log: FailureLog | None = None) -> None:
        super().__init__(work, common, environment, llm, derive, log,
                         failure_log or grader_failure_log)
        self.options = options
        self.files = {p: t for p in work.files() if p.endswith(".py")
                      and (t := work.read_text(p)) is not None}
        self.library = {p: self.files[p] for p in pyast.library_files(self.files)}

    def mutations(self) -> list[mutate.Mutation]:
        tests = "\n".join(t for p, t in self.files.items() if is_test_path(p))
        return mutations(self.library, self.options.operators, self.common.seed,
                         set(re.findall(r"\w+", tests)))

    def materialize(self, mutation: mutate.Mutation) -> Task | None:
        """The candidate task of one mutation, or None if the mutation does not verify."""
        text = self.library[mutation.file]
        buggy = mutate.verify(text, mutation)
        if buggy is None:
            return None
        src = pyast.Source(text)
        node = pyast.find(pyast.parse(text), mutation.qualname, mutation.occurrence)
        original = pyast.source_of(src, node)
        return self.planted(mutation, buggy, _reference(mutation.file, mutation.qualname,
                                                        mutation.occurrence, original))

    def check(self, task: Task) -> tuple[Task | None, str]:
        done, reason = self.derived(task)
        if done is None:
            return None, reason
        hidden = statements.hidden_lines(done, self.files)
        found = statements.facts(done, self.files.get)
        if found:  # what the failing tests observed (see repogym.tasks.checking)
            fallback = statements.facts_statement(done, found, name_tests=True, hidden=hidden)
        else:
            fallback = failure_statement(done.FAIL_TO_PASS, self.files, self.test_output(done))
        text, author = statements.written(self.llm, fallback, hidden, self.log)
        extra = {**statements.without_observations(done), "statement_from": author}
        return done.with_(problem_statement=text, extra=extra), reason
