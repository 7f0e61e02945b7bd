"""Small pieces shared by the sandbox implementations."""

from __future__ import annotations

import shlex

# git settings an agent could have planted in the repository's config, turned off.
_SAFE_GIT = (
    "git -c core.fsmonitor= -c core.hooksPath=/dev/null -c diff.external= -c core.pager=cat "
    "-c core.attributesFile=/dev/null -c diff.noprefix=false -c diff.mnemonicPrefix=false "
    "-c core.quotePath=true"
)


def git_diff_command(workdir: str, base: str) -> str:
    """A command printing the working tree's diff against ``base``, untracked files included.

    It uses a throwaway index so the agent's own index (and anything staged) is left alone.
    """
    idx = "/tmp/.repogym-diff-index"
    return (
        f"cd {shlex.quote(workdir)} && rm -f {idx} && "
        f"GIT_INDEX_FILE={idx} {_SAFE_GIT} read-tree {shlex.quote(base)} && "
        f"GIT_INDEX_FILE={idx} {_SAFE_GIT} add -A -- . ':(exclude,glob)**/*.pyc' "
        f"':(exclude,glob)**/__pycache__/**' ':(exclude,glob)**/*.egg-info/**' "
        f"':(exclude,glob)**/.pytest_cache/**' >/dev/null 2>&1; "
        f"GIT_INDEX_FILE={idx} {_SAFE_GIT} diff --cached --binary --no-color --no-ext-diff "
        f"--no-textconv {shlex.quote(base)}; __rc=$?; rm -f {idx}; exit $__rc"
    )


def restart_note(reason: str, cwd: str) -> str:
    return (
        f"[the shell died ({reason}); a new shell was started in {cwd}. "
        "Exported variables from before are gone; files are kept.]"
    )
