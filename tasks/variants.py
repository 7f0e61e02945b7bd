"""Predictions made from a task's gold patch, for comparing graders on more than gold and empty.

- ``gold``: the gold patch; ``empty``: no change (swebench's ``skip_patch``);
- ``drop_hunk``: the gold patch less its last hunk (None when it has one hunk);
- ``mutated``: the gold patch with one operator of its first added code line that has one
  flipped (``==`` to ``!=``, ``<`` to ``<=``, ``True`` to ``False``...; None when no added
  line has one).

Two graders that agree on all four, on the same image, agree on more than the easy cases: the
last two are near misses that usually fail some test, and sometimes do not (no test reaches
the flipped operator).
"""

from __future__ import annotations

import re

from repogym.schema import Task

KINDS = ("gold", "empty", "drop_hunk", "mutated")
FLIPS = [(" == ", " != "), (" != ", " == "), (" is not ", " is "), (" is ", " is not "),
         (" < ", " <= "), (" > ", " >= "), ("True", "False"), ("False", "True"),
         (" + 1", " - 1"), (" and ", " or "), (" or ", " and "), ("not ", "")]


def drop_last_hunk(patch: str) -> str | None:
    """The patch without its last hunk (and without a file left with none)."""
    files = re.split(r"(?m)^(?=diff --git )", patch)
    files = [f for f in files if f.strip()]
    hunks = [(i, m.start()) for i, f in enumerate(files) for m in re.finditer(r"(?m)^@@ ", f)]
    if len(hunks) < 2:
        return None
    i, start = hunks[-1]
    if sum(1 for j, _ in hunks if j == i) == 1:
        rest = files[:i] + files[i + 1:]
    else:
        rest = files[:i] + [files[i][:start]] + files[i + 1:]
    return "".join(rest)


def mutate_added_line(patch: str) -> str | None:
    """The patch with the first added code line that has a flippable operator flipped."""
    lines = patch.split("\n")
    for n, line in enumerate(lines):
        if not line.startswith("+") or line.startswith("+++"):
            continue
        body = line[1:]
        if body.lstrip().startswith("#"):
            continue
        for old, new in FLIPS:
            if old in body:
                lines[n] = "+" + body.replace(old, new, 1)
                return "\n".join(lines)
    return None


def predictions(task: Task) -> dict[str, str | None]:
    """Each kind's patch, None where the gold patch does not allow it."""
    return {"gold": task.patch, "empty": "", "drop_hunk": drop_last_hunk(task.patch),
            "mutated": mutate_added_line(task.patch)}
