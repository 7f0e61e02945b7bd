"""Shared pieces of the task sources: which files are tests, a private working repository in
which candidate commits are made, and the loop that turns candidates into validated tasks.

A source is a small object (see ``TaskSource``) that yields candidate tasks in an order fixed by
its seed and checks one candidate at a time (in Docker, through ``repogym.tasks.validate``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Protocol, TypeAlias

from repogym.errors import TaskError
from repogym.progress import Progress
from repogym.repo import SNAPSHOT_ENV
from repogym.schema import SPLITS, Task

# Folder names that hold tests (SWE-bench uses the same words to find test files).
TEST_DIRS = frozenset({"test", "tests", "testing", "e2e", "__tests__"})
# Files that count as test files wherever they are: pytest's configuration and fixtures.
TEST_FILES = frozenset({"conftest.py", "pytest.ini", "tests.py", "test.py"})
# Suffixes of source code; a mined commit must change at least one non-test file like these.
CODE_SUFFIXES = frozenset({
    ".py", ".pyx", ".pxd", ".pyi", ".c", ".h", ".cc", ".cpp", ".hpp", ".rs", ".go", ".js",
    ".ts", ".java", ".rb", ".php",
})

Deriver: TypeAlias = Callable[[Task], tuple[Task | None, str]]
Log: TypeAlias = Progress  # the one progress type, under the name task sources use


def is_test_path(path: str) -> bool:
    """True for files a task keeps hidden: anything in a test folder, ``test_*``/``*_test``/
    ``*_tests`` files (jsonpatch's ``property_tests.py``, which its pytest.ini names: its test
    methods were taken for library code to re-implement), ``conftest.py`` and ``pytest.ini``."""
    parts = PurePosixPath(path).parts
    if not parts:
        return False
    name = parts[-1]
    stem = name.split(".", 1)[0]
    if any(part.lower() in TEST_DIRS for part in parts[:-1]):
        return True
    if parts[0] == "benches" and name.endswith(".rs"):
        return True  # cargo's benches build with the tests; grading protects them alike
    # JavaScript's ``x.test.js``/``x.spec.ts``, Go's ``x_test.go`` (the stem rule)
    js_test = any(f".{word}." in name for word in ("test", "spec"))
    return (name in TEST_FILES or stem.startswith("test_") or stem.endswith(("_test", "_tests"))
            or js_test)


def split_paths(paths: Iterable[str]) -> tuple[list[str], list[str]]:
    """Splits paths into (non-test files, test files), each sorted."""
    code: list[str] = []
    tests: list[str] = []
    for path in sorted(set(paths)):
        (tests if is_test_path(path) else code).append(path)
    return code, tests


def is_code_path(path: str) -> bool:
    return PurePosixPath(path).suffix in CODE_SUFFIXES


def log_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class SourceOptions:
    """Options every source shares (the command line's common flags)."""

    max_candidates: int | None = None  # how many candidates to try at most (None: all)
    split: str = "eval"  # the split every produced task gets
    seed: int = 0  # fixes the order in which candidates are tried
    runs: int = 2  # how many times each side's tests run (flaky tests are dropped)

    def __post_init__(self) -> None:
        if self.max_candidates is not None and self.max_candidates < 1:
            raise ValueError(f"--max {self.max_candidates}: give a positive number of candidates.")
        if self.split not in SPLITS:
            raise ValueError(f"--split {self.split!r}: use one of {SPLITS}.")
        if self.runs < 1:
            raise ValueError(f"--runs {self.runs}: tests must run at least once per side.")


@dataclass(frozen=True)
class Rejected:
    """A candidate turned down before any test ran (its repository or spec is unusable)."""

    instance_id: str
    kind: str
    reason: str


Candidate: TypeAlias = Task | Rejected


class TaskSource(Protocol):
    """Where candidate tasks come from. ``candidates`` is deterministic for the source's seed;
    ``check`` returns the finished task, or None and the reason it was rejected."""

    name: str

    def candidates(self) -> Iterator[Candidate]: ...

    def check(self, task: Task) -> tuple[Task | None, str]: ...


# ---------------------------------------------------------------------------- git helpers


def run_git(cwd: Path, *args: str, env: dict[str, str] | None = None,
            input: bytes | None = None, check: bool = True) -> str:
    """Runs git with the fixed identity and date of snapshots, so commits made here have the
    same ids on every run (candidate generation is deterministic)."""
    proc = subprocess.run(
        ["git", "-c", "core.hooksPath=/dev/null", "-c", "core.quotePath=off", *args],
        cwd=cwd, env={**os.environ, **SNAPSHOT_ENV, **(env or {})}, input=input,
        capture_output=True,
    )
    if check and proc.returncode != 0:
        detail = proc.stderr.decode(errors="replace").strip()
        raise TaskError(f"git {' '.join(args[:3])} failed in {cwd}: {detail}")
    return proc.stdout.decode(errors="replace")


def is_git_source(path: Path) -> bool:
    return path.is_file() or (path / ".git").exists() or (path / "HEAD").is_file()


def _is_bundle(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(20).startswith((b"# v2 git bundle", b"# v3 git bundle"))


def repo_name(path: Path) -> str:
    """``owner/name`` from the origin remote when it has one, else the folder's name."""
    if is_git_source(path) and path.is_dir():
        url = run_git(path, "config", "--get", "remote.origin.url", check=False).strip()
        match = re.search(r"[:/]([\w.-]+)/([\w.-]+?)(?:\.git)?/?$", url)
        if match:
            return f"{match.group(1)}/{match.group(2)}"
    resolved = path.resolve()
    name = resolved.name
    if name == "repo" and "+" in resolved.parent.name:  # a mirror kept as OWNER+NAME/repo
        owner, _, project = resolved.parent.name.partition("+")
        return f"{owner}/{project}"
    return name[: -len(".bundle")] if name.endswith(".bundle") else name


def slug(repo: str) -> str:
    """The repository part of an instance id, SWE-bench style (``owner__name``)."""
    return re.sub(r"[^\w.-]", "_", repo.replace("/", "__"))


class WorkRepo:
    """A private clone of a source, checked out at the chosen commit. Candidate commits are made
    on top of that commit with a temporary index, one branch each, so the checkout stays
    pristine and every candidate survives a clone of the repository."""

    BRANCH_PREFIX = "repogym/"

    def __init__(self, path: Path, head: str, name: str) -> None:
        self.path = path
        self.head = head
        self.name = name
        self._files: list[str] | None = None

    @classmethod
    def create(cls, source: Path, dest: Path, rev: str = "HEAD", name: str | None = None
               ) -> WorkRepo:
        if not source.exists():
            raise TaskError(f"{source} does not exist: pass a repository or folder path.")
        if dest.exists():
            raise TaskError(f"{dest} already exists; choose an empty work folder.")
        if source.is_file() and not _is_bundle(source):
            raise TaskError(f"{source} is a file but no git bundle: pass a repository, a bundle "
                            "(git bundle create) or a folder.")
        name = name or repo_name(source)
        if is_git_source(source):
            run_git(dest.parent, "clone", "--quiet", "--no-hardlinks", str(source.resolve()),
                    str(dest))
            run_git(dest, "checkout", "--quiet", "--detach", rev)
        else:
            shutil.copytree(source, dest, symlinks=True,
                            ignore=shutil.ignore_patterns(".git", "__pycache__", "*.pyc"))
            run_git(dest, "init", "--quiet", "--initial-branch=main")
            run_git(dest, "add", "--all")  # a .gitignore there keeps virtualenvs and builds out
            run_git(dest, "commit", "--quiet", "--no-verify", "-m", f"import {name}")
        head = run_git(dest, "rev-parse", "HEAD").strip()
        return cls(dest, head, name)

    def files(self) -> list[str]:
        """Every tracked file at the head commit, sorted."""
        if self._files is None:
            out = run_git(self.path, "ls-tree", "-r", "-z", "--name-only", self.head)
            self._files = sorted(p for p in out.split("\0") if p)
        return self._files

    def read_text(self, path: str) -> str | None:
        """A file's text at the head commit, or None if it is not UTF-8 text."""
        try:
            return (self.path / path).read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            return None

    def commit_files(self, changes: dict[str, str], message: str, branch: str) -> str:
        """Commits ``changes`` (path to new text) on top of the head; returns the commit id."""
        with tempfile.TemporaryDirectory(prefix="repogym-index-") as tmp:
            env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            run_git(self.path, "read-tree", self.head, env=env)
            for path, text in sorted(changes.items()):
                mode = run_git(self.path, "ls-tree", self.head, "--", path).split(" ", 1)[0]
                blob = run_git(self.path, "hash-object", "-w", "--stdin",
                               input=text.encode("utf-8")).strip()
                run_git(self.path, "update-index", "--add", "--cacheinfo",
                        f"{mode or '100644'},{blob},{path}", env=env)
            tree = run_git(self.path, "write-tree", env=env).strip()
        commit = run_git(self.path, "commit-tree", tree, "-p", self.head, "-m", message).strip()
        run_git(self.path, "update-ref", f"refs/heads/{self.BRANCH_PREFIX}{branch}", commit)
        return commit

    def diff(self, old: str, new: str) -> str:
        return run_git(self.path, "diff", "--no-color", "--no-ext-diff", "--binary",
                       "--no-renames", old, new)

    def keep_only(self, commits: Iterable[str]) -> None:
        """Deletes the branches of candidates that were not kept, and their objects."""
        keep = set(commits)
        refs = run_git(self.path, "for-each-ref", "--format=%(objectname) %(refname)",
                       f"refs/heads/{self.BRANCH_PREFIX}")
        for line in refs.splitlines():
            commit, ref = line.split(" ", 1)
            if commit not in keep:
                run_git(self.path, "update-ref", "-d", ref)
        run_git(self.path, "reflog", "expire", "--expire=now", "--all")
        run_git(self.path, "gc", "--quiet", "--prune=now")


# ---------------------------------------------------------------------------- reasons


# The kinds of rejection, first match wins: what the summary and report.json count. A reason's
# text holds details (paths, test ids, a log's end) that differ from candidate to candidate and
# may hold colons of their own; the kind is what stays the same.
REASON_KINDS: tuple[tuple[str, str], ...] = (
    ("leak", r"^leak:"),
    ("untrusted certificate (set REPOGYM_CA_BUNDLE)", r"TLS certificate could not be verified"),
    ("setup fails without the spec's Python", r"^setup fails without the spec's Python"),
    ("setup fails", r"^setup fails"),
    ("setup installs nothing", r"did not install what it asked for"),
    ("no Docker engine", r"^infrastructure: No Docker engine"),
    ("image build fails", r"^infrastructure: building "),
    ("infrastructure", r"^infrastructure"),
    ("source incomplete", r"^source incomplete"),
    ("gold patch does not apply", r"^gold patch does not apply"),
    ("gold patch touches tests", r"^gold patch touches test paths"),
    ("tests time out", r"^tests time out"),
    ("tests not collected", r"^tests not collected"),
    ("canaries misbehaved", r"^canaries misbehaved"),
    ("no fail-to-pass test", r"^no test fails before the patch and passes after it"),
    ("breaks every test", r"^breaks every test"),
    ("gold does not resolve", r"^gold does not resolve"),
    ("gold as an agent's diff fails", r"^gold played as an agent's diff"),
    ("empty patch resolves", r"^the empty patch resolves"),
    ("flaky tests", r"^flaky tests"),
    ("patch too large", r"^patch too large"),
    ("empty patch", r"^empty patch"),
    ("no environment spec", r"^no environment spec"),
    ("no mirror", r"^no mirror"),
    ("base commit missing", r"^base commit missing"),
    ("cannot build here", r"^cannot build here"),
    ("bad instance or spec", r"^bad instance or spec"),
)


def reason_kind(reason: str) -> str:
    """The kind of a rejection (see ``REASON_KINDS``); a reason of no known kind is keyed by
    its words up to the first colon, bracket or quote, numbers as N."""
    for kind, pattern in REASON_KINDS:
        if re.search(pattern, reason):
            return kind
    head = re.split(r"[:(\[{'\"`]", reason, maxsplit=1)[0].strip().lower()
    return re.sub(r"\d+", "N", head)[:60].strip() or "unknown"


def interleave(iterators: list[Iterator[Candidate]]) -> Iterator[Candidate]:
    """Round-robin over several candidate streams (deterministic, like each stream)."""
    live = list(iterators)
    while live:
        for it in list(live):
            try:
                yield next(it)
            except StopIteration:
                live.remove(it)
