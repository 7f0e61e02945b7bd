"""Small pieces shared by the sandbox implementations."""

from __future__ import annotations

import shlex
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Generic, TypeVar

T = TypeVar("T")

# git settings an agent could have planted in the repository's config, turned off.
_SAFE_GIT = (
    "git -c core.fsmonitor= -c core.hooksPath=/dev/null -c diff.external= -c core.pager=cat "
    "-c core.attributesFile=/dev/null -c diff.noprefix=false -c diff.mnemonicPrefix=false "
    "-c core.quotePath=true"
)


# What never enters an agent's diff: caches and build metadata that running or installing the
# code writes (the grading container has its own). Images list them in the repository's
# ``.git/info/exclude`` too, so that ``git status`` does not show them (``tasks.images``).
DIFF_EXCLUDES = ("*.pyc", "__pycache__/", "*.egg-info/", ".pytest_cache/")


def exclude_pathspecs() -> str:
    """:data:`DIFF_EXCLUDES` as git pathspecs, quoted for the shell."""
    specs = [f"**/{p}**" if p.endswith("/") else f"**/{p}" for p in DIFF_EXCLUDES]
    return " ".join(shlex.quote(f":(exclude,glob){spec}") for spec in specs)


def git_diff_command(workdir: str, base: str) -> str:
    """A command printing the working tree's diff against ``base``, untracked files included.

    It uses a throwaway index so the agent's own index (and anything staged) is left alone.
    """
    idx = "/tmp/.repogym-diff-index"
    return (
        f"cd {shlex.quote(workdir)} && rm -f {idx} && "
        f"GIT_INDEX_FILE={idx} {_SAFE_GIT} read-tree {shlex.quote(base)} && "
        f"GIT_INDEX_FILE={idx} {_SAFE_GIT} add -A -- . {exclude_pathspecs()} >/dev/null 2>&1; "
        f"GIT_INDEX_FILE={idx} {_SAFE_GIT} diff --cached --binary --no-color --no-ext-diff "
        f"--no-textconv {shlex.quote(base)}; __rc=$?; rm -f {idx}; exit $__rc"
    )


def restart_note(reason: str, cwd: str) -> str:
    return (
        f"[the shell died ({reason}); a new shell was started in {cwd}. "
        "Exported variables from before are gone; files are kept.]"
    )


class Later(Generic[T]):
    """``fn()`` run in a thread of its own from now on; ``result()`` waits for it and gives
    what it returned, or raises what it raised."""

    def __init__(self, fn: Callable[[], T]):
        self._future: Future[T] = Future()
        threading.Thread(target=self._run, args=(fn,), daemon=True).start()

    def _run(self, fn: Callable[[], T]) -> None:
        try:
            self._future.set_result(fn())
        except BaseException as exc:  # noqa: BLE001  # handed to the caller of result()
            self._future.set_exception(exc)

    def result(self, timeout: float | None = None) -> T:
        return self._future.result(timeout)
