"""Repository snapshots: a tree at one commit, made into a fresh one-commit repository.

The snapshot carries no history, no other refs, no reflog and no remotes, so nothing after the
base commit can leak into a container. Its commit is made with a fixed identity and date, so the
same tree always gives the same commit id.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from repogym.errors import SourceIncomplete, TaskError

SNAPSHOT_ENV = {
    "GIT_AUTHOR_NAME": "repogym",
    "GIT_AUTHOR_EMAIL": "repogym@localhost",
    "GIT_COMMITTER_NAME": "repogym",
    "GIT_COMMITTER_EMAIL": "repogym@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
}


def git(cwd: Path | str, *args: str, check: bool = True, input: bytes | None = None) -> str:
    env = {**os.environ, **SNAPSHOT_ENV}
    proc = subprocess.run(
        ["git", "-c", "core.hooksPath=/dev/null", *args],
        cwd=cwd,
        env=env,
        input=input,
        capture_output=True,
    )
    if check and proc.returncode != 0:
        raise TaskError(
            f"git {' '.join(args)} failed in {cwd}: {proc.stderr.decode(errors='replace').strip()}"
        )
    return proc.stdout.decode(errors="replace")


def export_tree(source: str | Path, commit: str | None, dest: Path) -> None:
    """Writes the files of ``source`` at ``commit`` into ``dest`` (no ``.git``).

    ``source`` is a git repository, a git bundle, or a plain folder (then ``commit`` is ignored
    unless the folder is itself a repository).
    """
    src = Path(source)
    if not src.exists():
        raise TaskError(f"task source {src} does not exist: fix the task's `source` path.")
    dest.mkdir(parents=True, exist_ok=True)
    is_repo = src.is_file() or (src / ".git").exists() or (src / "HEAD").is_file()
    if not is_repo:
        shutil.copytree(
            src,
            dest,
            symlinks=True,
            dirs_exist_ok=True,
            ignore=shutil.ignore_patterns(
                ".git", "__pycache__", "*.pyc", ".pytest_cache", ".ruff_cache", ".mypy_cache"
            ),
        )
        return
    with tempfile.TemporaryDirectory(prefix="repogym-clone-") as tmp:
        git(tmp, "clone", "--quiet", "--no-checkout", str(src.resolve()), "repo")
        repo = Path(tmp) / "repo"
        target = commit or "HEAD"
        if git(repo, "cat-file", "-t", target, check=False).strip() != "commit":
            raise TaskError(f"commit {target} is not in {src}: check the task's base_commit.")
        proc = subprocess.run(["git", "archive", "--format=tar", target], cwd=repo,
                              capture_output=True)
        if proc.returncode != 0:
            said = proc.stderr.decode("utf-8", "replace").strip().splitlines()
            raise SourceIncomplete(
                f"source incomplete: {src} cannot write out commit {target[:12]} whole "
                f"({(said or ['git archive failed'])[0][:200]}): fetch the missing objects "
                "into it (`git fetch` from its origin), or give a complete clone")
        archive = proc.stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)


@functools.lru_cache(maxsize=256)
def read_at(source: str, commit: str | None, path: str) -> str | None:
    """The text of ``path`` in ``source`` at ``commit`` (as :func:`export_tree` would write it),
    or None when it is not there or not UTF-8. Read on the host: nothing in a container can
    change it."""
    src = Path(source)
    if not src.exists():
        return None
    if not (src.is_file() or (src / ".git").exists() or (src / "HEAD").is_file()):
        file = src / path
        try:
            return file.read_text(encoding="utf-8") if file.is_file() else None
        except UnicodeDecodeError:
            return None
    with tempfile.TemporaryDirectory(prefix="repogym-read-") as tmp:
        repo = src
        if src.is_file():  # a bundle: git reads it only by cloning
            git(tmp, "clone", "--quiet", "--bare", str(src.resolve()), "repo")
            repo = Path(tmp) / "repo"
        proc = subprocess.run(["git", "show", f"{commit or 'HEAD'}:{path}"], cwd=repo,
                              capture_output=True)
    if proc.returncode != 0:
        return None
    try:
        return proc.stdout.decode("utf-8")
    except UnicodeDecodeError:
        return None


_SKIPPED = (".git", "__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache")


def tree_paths(source: str | Path, commit: str | None) -> frozenset[str]:
    """The paths of the files :func:`export_tree` writes for ``source`` at ``commit``
    (relative, ``/``-separated): what the repository itself holds at /testbed."""
    src = Path(source)
    if not src.exists():
        return frozenset()
    if not (src.is_file() or (src / ".git").exists() or (src / "HEAD").is_file()):
        out = set()
        for folder, dirs, files in os.walk(src):
            dirs[:] = [d for d in dirs if d not in _SKIPPED]
            rel = Path(folder).relative_to(src)
            out |= {(rel / f).as_posix() for f in files if not f.endswith(".pyc")}
        return frozenset(out)
    return _git_paths(str(src.resolve()), commit or "HEAD")


@functools.lru_cache(maxsize=64)
def _git_paths(source: str, commit: str) -> frozenset[str]:
    with tempfile.TemporaryDirectory(prefix="repogym-paths-") as tmp:
        repo = Path(source)
        if repo.is_file():  # a bundle: git reads it only by cloning
            git(tmp, "clone", "--quiet", "--bare", source, "repo")
            repo = Path(tmp) / "repo"
        proc = subprocess.run(["git", "-c", "core.quotePath=off", "ls-tree", "-r", "-z",
                               "--name-only", commit], cwd=repo, capture_output=True)
    if proc.returncode != 0:
        return frozenset()
    return frozenset(p for p in proc.stdout.decode("utf-8", "surrogateescape").split("\0") if p)


def snapshot(tree: Path) -> str:
    """Makes ``tree`` a one-commit repository in place; returns its commit id."""
    if (tree / ".git").exists():
        shutil.rmtree(tree / ".git")
    git(tree, "init", "--quiet", "--initial-branch=main")
    git(tree, "add", "--all", "--force")
    git(tree, "commit", "--quiet", "--no-verify", "--allow-empty", "-m", "base")
    for path in ("logs", "ORIG_HEAD", "FETCH_HEAD", "hooks", "description", "info/exclude"):
        target = tree / ".git" / path
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
    return git(tree, "rev-parse", "HEAD").strip()


def snapshot_commit(source: str | Path, commit: str | None = None) -> str:
    """The commit id a snapshot of ``source`` at ``commit`` gets (computed in a temp folder)."""
    with tempfile.TemporaryDirectory(prefix="repogym-snap-") as tmp:
        tree = Path(tmp) / "tree"
        export_tree(source, commit, tree)
        return snapshot(tree)
