"""The checks that run beside the tests: whether the Python files the agent changed compile,
and whether the packages it changed still import (shell text for the grading container, and
the reading of what they printed)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Collection
from dataclasses import dataclass, field

from repogym.envs.grading.warm_pytest import IMPORT_CHECK

COMPILE_FAILED = "COMPILE_FAILED"
_IMPORTS = re.compile(r"\n__RG_IMPORTS=(\d)\n")
_SHADOW = re.compile(r"\n__RG_SHADOW=(.*)\n")


def kept_python(changed: list[str], stripped: Collection[str]) -> list[str]:
    """The Python files the agent changed and grading kept (``stripped``: the removed ones)."""
    return [p for p in changed if p.endswith(".py") and p not in stripped]


def compile_check(files: list[str]) -> str:
    """Shell that prints COMPILE_FAILED when one of ``files`` does not compile (root runs it:
    compiling runs none of the agent's code; ``-S``: no site-packages, whose ``.pth`` files put
    the repository on sys.path, where a ``sitecustomize`` would run at start-up)."""
    if not files:
        return ""
    code = ("import sys\nfor p in sys.argv[1:]:\n try: compile(open(p,'rb').read(),p,'exec')"
            "\n except (SyntaxError, ValueError, OSError): sys.exit(1)")
    return (f"timeout 30 python3 -I -S -c {shlex.quote(code)} "
            f"{' '.join(shlex.quote(f) for f in files)} >/dev/null 2>&1 || "
            f"printf {COMPILE_FAILED}; ")


def changed_modules(files: list[str]) -> list[str]:
    """The top-level packages and modules of ``files`` (``src/pkg/...`` is ``pkg``)."""
    tops = set()
    for path in files:
        parts = path.split("/")
        tops.add(parts[1] if len(parts) > 2 and parts[0] in ("src", "lib") else parts[0])
    return sorted(m for m in (t.removesuffix(".py") for t in tops) if m.isidentifier())


def import_check(modules: list[str], test_cmd: str) -> str:
    """Shell that says, on a marker line, whether ``modules`` still import, with the sys.path
    the test command gives them."""
    if not modules:
        return ""
    # what importing prints stays out of the log: only the check's line reaches it (fd 3)
    words = f" {test_cmd} "
    cwd = " -m pytest " in words or " -mpytest " in words
    code = IMPORT_CHECK + f"os.write(3, check(sys.argv[1:], {cwd}).encode())"
    return (f"timeout 10 python -c {shlex.quote(code)} {' '.join(modules)} "
            "3>&1 >/dev/null 2>&1; "
            "printf '\\n__RG_IMPORTS=%d\\n' $?;")


@dataclass
class ImportMarks:
    """The test run's log without the import check's marker lines, and what they said."""

    log: str
    imports: bool | None = None  # None: no check ran, or the run timed out
    shadowed: list[str] = field(default_factory=list)  # "module:path" imported from elsewhere


def read_import_marks(output: str, timed_out: bool) -> ImportMarks:
    """Takes the last marker lines out of the run's output. Only those leave the log: what code
    under test printed after them (at exit) is checked like everything else."""
    marks = list(_IMPORTS.finditer(output))
    if not marks:
        return ImportMarks(output)
    last = marks[-1]
    found = ImportMarks(output[: last.start()] + "\n" + output[last.end() :])
    if not timed_out:
        found.imports = last.group(1) == "0"
    shadow = list(_SHADOW.finditer(found.log))
    if shadow:  # a diagnosis only: nothing here decides a reward
        found.log = found.log[: shadow[-1].start()] + "\n" + found.log[shadow[-1].end() :]
        found.shadowed = shadow[-1].group(1).split()
    return found
