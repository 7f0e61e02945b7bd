"""Canary tests planted by the harness at grading time.

One must pass and one must fail. Code under test runs inside the test process and can tamper
with the runner (force passes, skip everything, exit early); a run in which a canary does not
behave is invalid. Their names look like the repository's own tests, so nothing can single
them out by name.

Where they go is decided in the grading container, by ``plant.py``, from the configuration the
run really uses (see there): the host sends a request (the random words of their names, what
the run names on its command line) with the staging upload, and reads back where the canary
went, or why it could not be planted.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_WORDS = (
    "roundtrip", "defaults", "edge_cases", "regression", "empty_input", "unicode", "ordering",
    "nested", "boundaries", "large_values", "repr", "equality", "copy", "errors", "parsing",
)
PLANTER = Path(__file__).with_name("plant.py")
DISGUISE = Path(__file__).with_name("disguise.py")


@dataclass(frozen=True)
class Canaries:
    path: str
    passing: str
    failing: str
    named: bool = False  # the command line names the canary's file
    extra: tuple[str, ...] = ()  # paths named with it, so that the run collects no less
    note: str = ""  # where the run collects, as the planter read it
    plugins: tuple[str, ...] = ()  # what the configuration's addopts loads with -p
    blocked: tuple[str, ...] = ()  # what it turns off (-p no:NAME)

    @property
    def ids(self) -> dict[str, str]:
        """Node id -> the status it must have."""
        return {f"{self.path}::{self.passing}": "PASSED", f"{self.path}::{self.failing}": "FAILED"}

    @property
    def args(self) -> list[str]:
        """What the test command's line must add for the canary to be collected."""
        return [*self.extra, self.path] if self.named else []

    @property
    def plugin_args(self) -> list[str]:
        """What every run's command line adds for the run to start as the configuration
        means it to, ``addopts`` being dropped: its ``-p`` plugins."""
        return [word for name in self.plugins for word in ("-p", name)]


@dataclass(frozen=True)
class Planted:
    """What the planter reported: the canaries, or why there are none."""

    canaries: Canaries | None
    error: str = ""
    disguise: Any = None  # disguise.py's report, when it ran


def request(args: list[str], files: list[str], added: list[str], rng: random.Random,
            extra: dict[str, Any] | None = None) -> str:
    """The planter's input: the test command's arguments, the files the grader names, the
    test patch's new files, and the random parts of the canaries' names and bodies (and,
    in ``extra``, what ``disguise.py`` needs)."""
    words = list(_WORDS)
    rng.shuffle(words)
    return json.dumps({"args": args, "files": files, "added": added, "words": words,
                       "n": rng.randint(3, 97), **(extra or {})})


def planter_source() -> str:
    return PLANTER.read_text(encoding="utf-8")


def disguise_source() -> str:
    return DISGUISE.read_text(encoding="utf-8")


def read_planted(value: str | None, output: str = "") -> Planted:
    """The planter's ``__RG_CANARY=`` line (``output``: the staging's, for the error)."""
    if value is None:
        tail = " | ".join(output.strip().splitlines()[-3:])[-300:]
        return Planted(None, f"the canary planter did not report (python3 missing or too old "
                             f"in the grading container?): {tail}")
    try:
        data = json.loads(value)
    except ValueError:
        return Planted(None, f"the canary planter's output is unreadable: {value[:200]!r}")
    if not isinstance(data, dict) or "error" in data or "path" not in data:
        return Planted(None, str(data.get("error") if isinstance(data, dict) else data))
    canaries = Canaries(str(data["path"]), str(data["passing"]), str(data["failing"]),
                        bool(data.get("named")), tuple(map(str, data.get("extra", []))),
                        str(data.get("note", "")), tuple(map(str, data.get("plugins", []))),
                        tuple(map(str, data.get("blocked", []))))
    return Planted(canaries, disguise=data.get("disguise"))


def canary_problems(canaries: Canaries, statuses: dict[str, str]) -> list[str]:
    return [
        f"canary {node} expected {want}, got {statuses.get(node, 'MISSING')}"
        for node, want in canaries.ids.items()
        if statuses.get(node) != want
    ]
