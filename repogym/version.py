"""repogym's version, and the checkout it runs from when it runs from one."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

__version__ = "0.1.0"


@functools.cache
def describe() -> str:
    """The version records carry: ``__version__`` for an installed package; run from a git
    checkout of repogym (an editable install), the version with the checkout's commit as a
    local version label, ``0.1.0+g5525fab1c3d2``, and ``.dirty`` when tracked files differ from
    it. The package's version does not change between commits; this names the code that
    produced a result."""
    return checkout_version(Path(__file__).resolve().parents[1])


def checkout_version(root: Path) -> str:
    """``__version__``, with the commit of the git checkout whose top folder is ``root``."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()

    try:
        if Path(git("rev-parse", "--show-toplevel")).resolve() != root:
            return __version__  # installed inside some other repository's tree
        commit = git("rev-parse", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        return __version__  # no git, or not a checkout: a wheel's install
    return f"{__version__}+g{commit[:12]}" + (".dirty" if dirty else "")
