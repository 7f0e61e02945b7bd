"""Read access to one commit's files (a folder, or a commit of a git repository read without
checking it out), and the TOML reader the detectors share."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from .common import run_git


class TreeView(Protocol):
    """Read access to one commit's files."""

    def files(self) -> list[str]: ...

    def read_text(self, path: str) -> str | None: ...


class DirTree:
    def __init__(self, root: Path) -> None:
        self.root = root

    def files(self) -> list[str]:
        return sorted(p.relative_to(self.root).as_posix() for p in self.root.rglob("*")
                      if p.is_file() and ".git" not in p.relative_to(self.root).parts)

    def read_text(self, path: str) -> str | None:
        try:
            return (self.root / path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None


class GitTree:
    """A commit of a repository, read without checking it out."""

    def __init__(self, repo: Path, commit: str) -> None:
        self.repo, self.commit = repo, commit

    def files(self) -> list[str]:
        out = run_git(self.repo, "ls-tree", "-r", "-z", "--name-only", self.commit)
        return sorted(p for p in out.split("\0") if p)

    def read_text(self, path: str) -> str | None:
        text = run_git(self.repo, "show", f"{self.commit}:{path}", check=False)
        return text or None


def load_toml(text: str) -> dict[str, Any]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10 has no tomllib; tomli is the same parser
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return {}
