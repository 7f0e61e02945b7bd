"""The seam between the grader and a language's test runner.

A :class:`TestRunner` says how the harness runs a task's tests (a command for the tests' user,
with the harness's own reporters), where the runner's machine-readable results land, how to
read them, what swebench's log parser calls each test (the cross-check), and what a canary
test looks like in that language. The grader (``langrun.py``) does the rest exactly as for
pytest: staging, locks, the run, the cross-check, canaries, the exit status, the verdict.
"""

from __future__ import annotations

import posixpath
import random
import shlex
from dataclasses import dataclass
from typing import Protocol

from repogym.schema import Environment

OUT = "/opt/repogym-grade/out"
_WORDS = (
    "roundtrip", "defaults", "edge", "regression", "empty", "unicode", "ordering", "nested",
    "boundaries", "large", "repr", "equality", "copy", "errors", "parsing", "format",
)
WORST = {"ERROR": 4, "FAILED": 3, "SKIPPED": 2, "PASSED": 1}


@dataclass(frozen=True)
class Canary:
    """A test file the harness plants: ``script`` (bash, run as root in /testbed) writes it at
    ``path``; ``ids`` maps each canary test's id to the status it must have."""

    path: str
    script: str
    ids: dict[str, str]


class TestRunner(Protocol):
    name: str
    log_parser: str  # swebench's parser for the console log (the cross-check)
    default_cmd: str  # the runner's invocation when the task's test_cmd does not give one

    def command(self, env: Environment, files: list[str]) -> str:
        """Bash run as the tests' user in /testbed; results go under ``OUT``."""
        ...

    def parse(self, outputs: dict[str, str], log: str) -> dict[str, str]:
        """Statuses by test id from the runner's machine-readable files (name: text)."""
        ...

    def log_key(self, test_id: str) -> str:
        """What swebench's log parser calls the test ``test_id``."""
        ...

    def canary(self, test_files: list[str], rng: random.Random) -> Canary: ...

    def exit_problem(self, code: int, statuses: dict[str, str]) -> str | None:
        """Why ``code`` disagrees with the results, or None."""
        ...

    def built(self, log: str, statuses: dict[str, str]) -> bool | None:
        """Whether the code compiled (None: the runner cannot tell)."""
        ...


def invocation(env: Environment, default: str) -> str:
    """The task's test command, or the runner's own when the task kept Python's default."""
    python_default = Environment.__dataclass_fields__["test_cmd"].default
    return default if env.test_cmd in ("", python_default) else env.test_cmd


def words(rng: random.Random, n: int = 2) -> list[str]:
    return rng.sample(_WORDS, n)


def camel(parts: list[str]) -> str:
    return "".join(p[:1].upper() + p[1:] for p in parts)


def put(path: str, text: str) -> str:
    """Bash that writes ``text`` to ``path`` (a new file) as root's, read-only for others."""
    folder = posixpath.dirname(path) or "."
    q = shlex.quote(path)
    return (f"mkdir -p -- {shlex.quote(folder)} && printf %s {shlex.quote(text)} > {q} && "
            f"chown root:root {q} && chmod 644 {q}")


class Results(dict[str, str]):
    """Statuses by test id, every status each id had (``seen``), and the ids whose one run the
    results report more than once (``conflicts``: forged, see ``GoTest.parse``)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: dict[str, set[str]] = {}
        self.conflicts: set[str] = set()


def merge(statuses: dict[str, str], test_id: str, status: str) -> None:
    """The same id reported twice (a parametrised test, a name in two binaries): worst wins.
    Every status an id had is kept too (``Results.seen``): a log parser keeps the last one."""
    if isinstance(statuses, Results):
        statuses.seen.setdefault(test_id, set()).add(status)
    old = statuses.get(test_id)
    if old is None or WORST.get(status, 0) > WORST.get(old, 0):
        statuses[test_id] = status


def seen(statuses: dict[str, str]) -> dict[str, set[str]]:
    """Every status each id of ``statuses`` had (see ``merge``)."""
    return statuses.seen if isinstance(statuses, Results) else {}


def conflicts(statuses: dict[str, str]) -> set[str]:
    return statuses.conflicts if isinstance(statuses, Results) else set()


def plain_exit(code: int, statuses: dict[str, str], ok: int = 0) -> str | None:
    failing = [t for t, s in statuses.items() if s in ("FAILED", "ERROR")]
    if code == ok and failing:
        return f"the runner exited {code} although {len(failing)} tests failed"
    if code != ok and not failing and statuses:
        return f"the runner exited {code} but no test failed"
    return None


def dirs_of(files: list[str], default: str) -> str:
    return posixpath.dirname(files[0]) if files else default
