"""Tasks mined from a repository's history: commits that change both code and tests.

A commit becomes a candidate whose base is its parent, whose patch is its diff to non-test files
and whose test_patch is its diff to test files. The tests run before and after decide
FAIL_TO_PASS and PASS_TO_PASS. The problem statement is the commit message, or an issue text the
user supplies, or (when an endpoint is configured) an issue a model writes from both.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

from repogym.errors import TaskError
from repogym.schema import Task

from . import statements
from .common import (
    Candidate,
    Deriver,
    Log,
    Rejected,
    SourceOptions,
    is_code_path,
    log_stderr,
    repo_name,
    run_git,
    slug,
    split_paths,
)
from .deriver import default_deriver
from .detect import EnvOverrides, detect_environment, with_change_imports
from .detect_langs import detect_language, unbuildable
from .statement_model import LLMConfig
from .tree_view import GitTree


@dataclass(frozen=True)
class GitOptions:
    path: Path  # a local git repository with history
    rev: str = "HEAD"  # mine the history reachable from this revision
    issues: Path | None = None  # issue texts: a folder of <sha|number>.md/.txt, or JSON/YAML
    max_files: int = 30  # skip commits that touch more files than this
    max_lines: int = 2000  # reject candidates whose two patches have more lines than this

    def __post_init__(self) -> None:
        if self.max_files < 2 or self.max_lines < 2:
            raise ValueError("--max-files and --max-lines must be at least 2 (code and a test).")
        if self.issues is not None and not self.issues.exists():
            raise ValueError(f"--issues {self.issues} does not exist: give a folder of "
                             "<commit-or-issue-number>.md files or a JSON/YAML mapping.")


@dataclass(frozen=True)
class Commit:
    sha: str
    parent: str
    files: tuple[str, ...]


def eligible_commits(repo: Path, rev: str = "HEAD", max_files: int = 30) -> list[Commit]:
    """Non-merge commits reachable from ``rev`` that change a test file and a code file, in
    ``git log`` order (newest first)."""
    out = run_git(repo, "log", "--no-merges", "--no-renames", "--format=%x1e%H %P",
                  "--name-only", rev)
    found = []
    for chunk in out.split("\x1e")[1:]:
        lines = [line for line in chunk.splitlines() if line.strip()]
        sha, *parents = lines[0].split()
        files = tuple(lines[1:])
        if len(parents) != 1 or not files or len(files) > max_files:
            continue
        code, tests = split_paths(files)
        if tests and any(is_code_path(p) for p in code):
            found.append(Commit(sha, parents[0], files))
    return found


def split_commit(repo: Path, commit: Commit) -> tuple[str, str]:
    """(patch, test_patch): the commit's diff to non-test files and to test files."""
    code, tests = split_paths(commit.files)

    def diff(paths: list[str]) -> str:
        specs = [f":(literal){p}" for p in paths]
        return run_git(repo, "diff", "--no-color", "--no-ext-diff", "--binary", "--no-renames",
                       commit.parent, commit.sha, "--", *specs)

    return diff(code), diff(tests)


def load_issues(path: Path | None) -> dict[str, str]:
    """Issue texts keyed by commit id (or prefix) or issue number."""
    if path is None:
        return {}
    if path.is_dir():
        return {p.stem: p.read_text(encoding="utf-8") for p in sorted(path.iterdir())
                if p.suffix in (".md", ".txt")}
    text = path.read_text(encoding="utf-8")
    data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    if not isinstance(data, dict):
        raise TaskError(f"{path} must map commit ids or issue numbers to issue texts.")
    return {str(k): str(v) for k, v in data.items()}


def issue_for(issues: dict[str, str], sha: str, message: str) -> str | None:
    """The supplied issue of a commit: by commit id prefix, else by a ``#N`` in its message."""
    for key, text in sorted(issues.items()):
        if len(key) >= 7 and re.fullmatch(r"[0-9a-f]+", key) and sha.startswith(key):
            return text
    for number in re.findall(r"#(\d+)", message):
        if number in issues:
            return issues[number]
    return None


class GitSource:
    """Candidates from a repository's history (see the module docstring)."""

    name = "git"

    def __init__(self, options: GitOptions, common: SourceOptions,
                 overrides: EnvOverrides | None = None, llm: LLMConfig | None = None,
                 derive: Deriver | None = None, log: Log = log_stderr,
                 work_dir: Path | None = None) -> None:
        """With ``work_dir``, tasks point at a mirror clone made there, so a suite copies the
        history alone, not the checkout with whatever else lies in it."""
        path = options.path.resolve()
        if not (path / ".git").exists() and not (path / "HEAD").is_file():
            raise TaskError(f"{path} is not a git repository; `tasks add git` needs history "
                            "(use `tasks add replication` or `synthetic` for a plain folder).")
        self.repo = path
        if work_dir is not None:
            self.repo = work_dir / f"{slug(repo_name(path)).split('__')[-1]}.git"
            run_git(work_dir, "clone", "--quiet", "--mirror", str(path), str(self.repo))
        self.options, self.common, self.overrides = options, common, overrides
        self.llm, self.log = llm, log
        self.derive = derive or default_deriver(common.runs)
        self.name_of_repo = repo_name(path)
        self.issues = load_issues(options.issues)

    def commits(self) -> list[Commit]:
        """Eligible commits in the order they are tried (shuffled with the seed)."""
        found = eligible_commits(self.repo, self.options.rev, self.options.max_files)
        random.Random(self.common.seed).shuffle(found)
        return found

    def candidates(self) -> Iterator[Candidate]:
        for commit in self.commits():
            yield self.materialize(commit)

    def materialize(self, commit: Commit) -> Candidate:
        """The commit as a task, or Rejected when its base cannot be built offline (unless
        the user's own setup commands say how)."""
        instance_id = f"{slug(self.name_of_repo)}-{commit.sha[:12]}"
        base = GitTree(self.repo, commit.parent)
        files = set(base.files())
        why = unbuildable(files, detect_language(files))
        if why and (self.overrides is None or self.overrides.setup is None):
            return Rejected(instance_id, "swe", why)
        patch, test_patch = split_commit(self.repo, commit)
        message = run_git(self.repo, "log", "-1", "--format=%B", commit.sha).strip()
        issue = issue_for(self.issues, commit.sha, message)
        env = detect_environment(base, self.overrides)
        if self.overrides is None or self.overrides.setup is None:
            env = with_change_imports(env, base, GitTree(self.repo, commit.sha),
                                      set(commit.files))
        return Task(
            instance_id=instance_id,
            repo=self.name_of_repo, base_commit=commit.parent,
            problem_statement=issue or message, patch=patch, test_patch=test_patch,
            source=str(self.repo), environment=env, kind="swe", split=self.common.split,
            created_at=run_git(self.repo, "log", "-1", "--format=%cI", commit.sha).strip(),
            extra={"commit": commit.sha, "statement_from": "issue" if issue else "commit"},
        )

    def check(self, task: Task) -> tuple[Task | None, str]:
        lines = task.patch.count("\n") + task.test_patch.count("\n")
        if lines > self.options.max_lines:
            return None, f"patch too large: {lines} lines (raise --max-lines to keep it)"
        if not task.patch.strip() or not task.test_patch.strip():
            return None, "empty patch: the commit's code or test changes are empty diffs"
        done, reason = self.derive(task)
        if done is None:
            return None, reason
        extra = statements.without_observations(done)
        if extra.get("statement_from") == "issue":
            return done.with_(extra=extra), reason  # the user's own issue text
        hidden = statements.hidden_lines(done, {})
        found = statements.facts(done, lambda path: run_git(
            self.repo, "show", f"{done.base_commit}:{path}", check=False) or None)
        if not found and self.llm is None:
            return done.with_(extra=extra), reason  # the commit message, as it is
        message = task.problem_statement
        fallback = (statements.facts_statement(done, found, context=message, hidden=hidden)
                    if found else message)
        text, author = statements.written(self.llm, fallback, hidden, self.log)
        if not found and author != "llm":
            author = "commit"
        return done.with_(problem_statement=text, extra={**extra, "statement_from": author}), (
            reason)
