"""Replication tasks: a function, class or module loses its code and the agent writes it again.

Each candidate is a new commit on top of the chosen one in which the bodies are replaced by
``raise NotImplementedError`` (signatures, decorators and docstrings stay). The task's patch
restores them; its tests are the repository's own (``test_patch`` is empty), and FAIL_TO_PASS is
what the removal breaks, so functions no test exercises are rejected. The problem statement is
a specification (where, signature, documentation, how the rest of the code uses it), never the
removed code, which is kept as ``task.reference`` for the similarity reward, with the cases
of differential testing recorded from the tests (see ``trace``).
"""

from __future__ import annotations

import ast
import hashlib
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

from repogym.schema import Environment, Reference, Task

from . import pyast
from .common import (
    Deriver,
    Log,
    SourceOptions,
    WorkRepo,
    is_test_path,
    log_stderr,
    slug,
)
from .deriver import default_deriver
from .statement_model import SPEC_SYSTEM, LLMConfig, statement
from .trace import recorder

GRANULARITIES = ("function", "class", "module")
# records cases, or rejects a task whose image holds the reference already (see .trace)
Recorder: TypeAlias = Callable[[Task], tuple[Task | None, str]]
MAX_USAGES = 10


@dataclass(frozen=True)
class ReplicationOptions:
    path: Path  # a git repository, bundle or plain folder
    rev: str = "HEAD"  # the commit the tasks start from
    granularity: str = "function"  # what is removed: one function, a class, or a whole module
    min_lines: int = 3  # skip bodies shorter than this (too easy to be worth a task)

    def __post_init__(self) -> None:
        if self.granularity not in GRANULARITIES:
            raise ValueError(f"--granularity {self.granularity!r}: use one of {GRANULARITIES}.")
        if self.min_lines < 1:
            raise ValueError(f"--min-lines {self.min_lines}: give at least 1.")


@dataclass(frozen=True)
class Target:
    """What one candidate removes: ``qualname`` is empty for a whole module."""

    file: str
    qualname: str
    granularity: str
    occurrence: int = 0  # which definition of ``qualname`` (see ``pyast.Definition``)

    @property
    def key(self) -> str:
        blob = f"{self.granularity}:{self.file}:{self.qualname}:{self.occurrence}".encode()
        return hashlib.sha1(blob).hexdigest()[:8]

    @property
    def label(self) -> str:
        return self.qualname or pyast.module_name(self.file) or self.file


def _functions(module: ast.Module, target: Target) -> list[pyast.FunctionNode]:
    if target.granularity == "module":
        return [d.node for d in pyast.definitions(module)
                if not isinstance(d.node, ast.ClassDef)]
    return pyast.functions_in(pyast.find(module, target.qualname, target.occurrence))


def find_targets(files: dict[str, str], granularity: str, min_lines: int = 3) -> list[Target]:
    """Every removable function, class or module of ``files`` (path to text), in file order."""
    found = []
    for path, text in sorted(files.items()):
        try:
            module = pyast.parse(text)
        except SyntaxError:
            continue
        if granularity == "module":
            candidates = [Target(path, "", "module")]
        else:
            want_class = granularity == "class"
            candidates = [Target(path, d.qualname, granularity, d.occurrence)
                          for d in pyast.definitions(module) if d.is_class == want_class]
        for target in candidates:
            live = [fn for fn in _functions(module, target) if not pyast.is_trivial(fn)]
            if live and sum(pyast.body_lines(fn) for fn in live) >= min_lines:
                found.append(target)
    return found


def remove_body(text: str, target: Target) -> str:
    """``text`` with the target's function bodies replaced by ``raise NotImplementedError``."""
    return pyast.stub_bodies(pyast.Source(text), _functions(pyast.parse(text), target))


def reference(text: str, target: Target) -> Reference:
    """The removed code, as the similarity reward compares against it."""
    if target.granularity == "module":
        code = text
    else:
        node = pyast.find(pyast.parse(text), target.qualname, target.occurrence)
        code = pyast.source_of(pyast.Source(text), node)
    ref: Reference = {"file": target.file, "qualname": target.qualname,
                      "granularity": target.granularity, "source": code}
    if target.occurrence:
        ref["occurrence"] = target.occurrence
    return ref


# ---------------------------------------------------------------------------- the specification


def _names(target: Target, module: ast.Module) -> list[str]:
    """The names a caller of the target writes: the function (and its class), the class and
    its methods, or the module and what it defines."""
    if target.granularity == "module":
        names = [pyast.module_name(target.file).rsplit(".", 1)[-1]]
        names += [d.node.name for d in pyast.definitions(module) if "." not in d.qualname]
    else:
        node = pyast.find(module, target.qualname, target.occurrence)
        names = target.qualname.split(".")[-2:]
        if isinstance(node, ast.ClassDef):
            names += [fn.name for fn in pyast.functions_in(node)]
    return sorted({n for n in names if n and not n.startswith("__")})


def usages(files: dict[str, str], target: Target, text: str) -> list[str]:
    """Lines elsewhere that use the target, tests first: ``path:line: code``."""
    own = _own_lines(text, target)
    names = _names(target, pyast.parse(text))
    if not names:
        return []
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b")
    found = []
    for path in sorted(files, key=lambda p: (not is_test_path(p), p)):
        for number, line in enumerate(files[path].splitlines(), start=1):
            code = line.strip()
            if (path == target.file and number in own) or not pattern.search(code):
                continue
            if code.startswith(("def ", "async def ", "class ", "#")):
                continue
            found.append(f"{path}:{number}: {code[:160]}")
            if len(found) >= MAX_USAGES:
                return found
    return found


def _own_lines(text: str, target: Target) -> range:
    if target.granularity == "module":
        return range(1, text.count("\n") + 2)
    node = pyast.find(pyast.parse(text), target.qualname, target.occurrence)
    return range(node.lineno, (node.end_lineno or node.lineno) + 1)


def _stub(src: pyast.Source, node: pyast.DefNode) -> str:
    """The definition as a stub: decorators, signature, docstring (and methods, for a
    class), no code."""
    doc = ast.get_docstring(node)
    inner = [f'"""{doc}"""'] if doc is not None else []
    if isinstance(node, ast.ClassDef):
        for child in node.body:
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                inner += ["", _stub(src, child)]
    body = "\n".join(inner) if inner else "..."
    return pyast.signature(src, node) + "\n" + _indent(body)


def _indent(text: str) -> str:
    return "\n".join("    " + line if line else "" for line in text.splitlines())


def specification(files: dict[str, str], target: Target) -> str:
    """The problem statement: what to implement and how it is used, without the code.
    ``files`` holds every Python file of the repository (tests included) by path."""
    text = files[target.file]
    src, module = pyast.Source(text), pyast.parse(text)
    where = f"`{target.file}` (module `{pyast.module_name(target.file)}`)"
    if target.granularity == "module":
        head = (f"Every function and method in {where} has lost its body: each now raises "
                "`NotImplementedError`. Implement them all.\n")
        doc = ast.get_docstring(module)
        stubs = [_stub(src, d.node) for d in pyast.definitions(module) if "." not in d.qualname]
        parts = [head, f"Module documentation:\n\n{doc}\n" if doc else "",
                 "What the module defines:\n\n```python\n" + "\n\n".join(stubs) + "\n```\n"]
    else:
        node = pyast.find(module, target.qualname, target.occurrence)
        what = "Every method of class" if target.granularity == "class" else "The body of"
        parts = [f"{what} `{target.qualname}` in {where} has been removed and now raises "
                 "`NotImplementedError`. Implement it.\n",
                 f"```python\n{_stub(src, node)}\n```\n"]
    uses = usages(files, target, text)
    if uses:
        parts.append("How the rest of the repository uses it:\n\n```\n" + "\n".join(uses)
                     + "\n```\n")
    parts.append("Keep every signature as it is. The implementation must behave as documented "
                 "and as its callers expect; hidden tests check it.")
    return "\n".join(p for p in parts if p)


# ---------------------------------------------------------------------------- the source


class ReplicationSource:
    """Replication candidates from a working repository (see the module docstring)."""

    name = "replication"

    def __init__(self, work: WorkRepo, options: ReplicationOptions, common: SourceOptions,
                 environment: Environment, llm: LLMConfig | None = None,
                 derive: Deriver | None = None, log: Log = log_stderr, *,
                 record: Recorder | None = None) -> None:
        self.work, self.options, self.common = work, options, common
        self.environment, self.llm, self.log = environment, llm, log
        self.derive = derive or default_deriver(common.runs)
        # --- differential testing: cases are recorded in Docker, like the lists are derived;
        # a source given its own deriver (tests, local checks) records only if given a recorder
        self.record = record if record is not None else (None if derive else recorder())
        # ---
        self.files = {p: t for p in work.files() if p.endswith(".py")
                      and (t := work.read_text(p)) is not None}
        self.library = {p: self.files[p] for p in pyast.library_files(self.files)}

    def targets(self) -> list[Target]:
        """All targets, those the tests mention first, each group shuffled with the seed."""
        found = find_targets(self.library, self.options.granularity, self.options.min_lines)
        tests = "\n".join(t for p, t in self.files.items() if is_test_path(p))
        rng = random.Random(self.common.seed)
        words = set(re.findall(r"\w+", tests))
        modules = {path: pyast.parse(self.library[path]) for path in {t.file for t in found}}
        named = {t for t in found if words.intersection(_names(t, modules[t.file]))}
        mentioned = [t for t in found if t in named]
        rest = [t for t in found if t not in named]
        rng.shuffle(mentioned)
        rng.shuffle(rest)
        return mentioned + rest

    def candidates(self) -> Iterator[Task]:
        for target in self.targets():
            yield self.materialize(target)

    def materialize(self, target: Target) -> Task:
        text = self.library[target.file]
        base = self.work.commit_files({target.file: remove_body(text, target)},
                                      f"Remove {target.label}", f"replication/{target.key}")
        label = re.sub(r"[^\w.]", "_", target.label)
        return Task(
            instance_id=f"{slug(self.work.name)}-replication-{label}-{target.key}",
            repo=self.work.name, base_commit=base,
            problem_statement=specification(self.files, target),
            patch=self.work.diff(base, self.work.head), source=str(self.work.path),
            environment=self.environment, kind="replication", split=self.common.split,
            reference=reference(text, target),
            extra={"original_commit": self.work.head, "granularity": target.granularity},
        )

    def check(self, task: Task) -> tuple[Task | None, str]:
        done, reason = self.derive(task)
        if done is None:
            return None, reason
        # --- differential testing: the reference's cases (see repogym.tasks.sources.trace)
        if self.record is not None:
            recorded, note = self.record(done)
            if recorded is None:
                return None, note
            self.log(f"{done.instance_id}: {note}")
            done = recorded.with_(extra={**recorded.extra, "differential": note})
        # ---
        prompt = ("Rewrite this as a clear specification for the developer who must implement "
                  "the code:\n\n" + task.problem_statement)
        text = statement(self.llm, SPEC_SYSTEM, prompt, task.problem_statement, self.log)
        return done.with_(problem_statement=text), reason
