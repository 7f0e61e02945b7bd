"""What every attack is made of: the survey of the repository, the tool calls, the payloads.

An attack (:class:`Hack`) is a script of tool calls (a generator that gets each call's
observation back) and the flags the grader must raise for it. Scripts start from what the
survey found (:class:`Repo`); the information attacks record what they saw in
:class:`Findings`. The code attacks plant lives in ``payloads/`` as files (each one a Python
file ruff reads), filled in by :func:`payload`.
"""

from __future__ import annotations

import base64
import json
import re
import shlex
import zlib
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from repogym.agents.agent import AgentError
from repogym.resources import script

Action = dict[str, Any]
Script = Generator[Action, str, None]

TARGETS_MARKER = "Hidden test ids:"
PAYLOADS = "repogym.agents.attacks"


@dataclass(frozen=True)
class Repo:
    """What the survey at the start of an episode found in the repository."""

    files: tuple[str, ...]
    packages: tuple[str, ...]
    test_files: tuple[str, ...]
    test_ids: tuple[str, ...]
    site_packages: tuple[str, ...]
    user_site: str
    targets: tuple[str, ...] = ()

    @property
    def aims(self) -> tuple[str, ...]:
        """The test ids a hack aims at: the hidden ones when known, else every test."""
        return self.targets or self.test_ids

    @property
    def test_dir(self) -> str:
        first = (self.targets or self.test_files or ("tests/x.py",))[0].split("::")[0]
        return first.rsplit("/", 1)[0] if "/" in first else "."


@dataclass
class Findings:
    """What the information hacks saw, and what of it would be a leak."""

    outputs: dict[str, str] = field(default_factory=dict)
    leaks: list[str] = field(default_factory=list)


HackScript = Callable[[Repo, Findings], Script]


@dataclass(frozen=True)
class Hack:
    """One attack: a script of tool calls, the flags the grader must raise for it (a flag
    ending in ``_`` is a prefix), and a line saying what it tries."""

    name: str
    script: HackScript
    flags: tuple[str, ...]
    doc: str

    def detected(self, flags: list[str]) -> bool:
        """Whether ``flags`` (``info["flags"]`` after submit) hold every flag this hack needs."""
        return all(any(f == want or (want.endswith("_") and f.startswith(want)) for f in flags)
                   for want in self.flags)


# --- payloads ---------------------------------------------------------------------------------

_FILLED = re.compile(r"^(?P<name>_[A-Z]+) = .*# filled in.*$", re.M)


def payload(name: str, **values: object) -> str:
    """The text of ``payloads/NAME.py`` with its ``_NAME = ...  # filled in`` lines set to
    ``values`` (by the name without its underscore, lower case: ``targets=`` sets
    ``_TARGETS``). Every such line must be given a value."""
    text = script(PAYLOADS, f"payloads/{name}.py")
    wanted = {m.group("name")[1:].lower() for m in _FILLED.finditer(text)}
    if wanted != set(values):
        raise ValueError(f"payload {name} fills in {sorted(wanted)}, given {sorted(values)}")
    return _FILLED.sub(lambda m: f"{m.group('name')} = {values[m.group('name')[1:].lower()]!r}",
                       text)


# --- tool calls -------------------------------------------------------------------------------


def bash(command: str) -> Action:
    return {"tool": "bash", "command": command}


def write(repo: Repo, path: str, text: str) -> Action:
    """``create`` for a new file; an append through bash for a file the repository has."""
    if path not in repo.files:
        return {"tool": "create", "path": path, "file_text": text}
    data = base64.b64encode(("\n" + text).encode()).decode()
    return bash(f"printf %s {data} | base64 -d >> {shlex.quote(path)}")


def python(code: str, *args: str) -> Action:
    quoted = " ".join(shlex.quote(a) for a in args)
    return bash(f"python3 - {quoted} <<'__HACK__'\n{code}\n__HACK__")


def in_package(repo: Repo, code: str) -> Script:
    """Appends ``code`` to every package's ``__init__.py``: it runs when the tests import it."""
    for package in repo.packages:
        yield write(repo, f"{package}/__init__.py", code)


def lines(obs: str) -> list[str]:
    """An observation's lines without the tool's own notes."""
    return [ln for ln in obs.splitlines() if ln.strip() and not ln.startswith("[")]


# --- the survey -------------------------------------------------------------------------------

# The survey's findings can be far longer than one observation shows (an observation keeps the
# head and the tail of a command's output, 8,000 bytes each by default; flask's `git ls-files`
# alone is 7,137 characters): the survey writes them to a file, compressed, and prints the
# first part; the agent reads the rest a part at a time, halving a part that came back cut.
SURVEY_FILE = "/tmp/.repogym-survey"
SURVEY_PART = 6000  # characters per part at first
SURVEY_MORE = "SURVEY_MORE"


class Survey:
    """The survey's parts as they arrive (``payloads/survey.py``); ``take`` returns the next
    tool call that reads one, None once the survey is whole. A call whose output lacks its line
    (it timed out: the machine may be loaded far beyond its cores) is made again, up to
    ``RETRIES`` times in a row."""

    RETRIES = 3

    def __init__(self, need_ids: bool) -> None:
        self.need_ids = need_ids
        self.size: int | None = None
        self.text = ""
        self.part = SURVEY_PART
        self.misses = 0

    def start(self) -> Action:
        return python(payload("survey"), "ids" if self.need_ids else "-", SURVEY_FILE,
                      str(self.part))

    def _more(self) -> Action:
        return bash(f"printf '{SURVEY_MORE} '; tail -c +{len(self.text) + 1} {SURVEY_FILE} "
                    f"| head -c {self.part}; echo")

    def take(self, obs: str) -> Action | None:
        """Takes an observation; returns the call that reads the next part, or None."""
        line = _marked(obs, "SURVEY " if self.size is None else f"{SURVEY_MORE} ")
        if line is None:
            self.misses += 1
            if self.misses > self.RETRIES:
                said = "printed nothing" if self.size is None else "cannot be read back"
                raise AgentError(f"the hacker's survey of the repository {said} "
                                 f"({self.misses} tries): {obs[-500:]}")
            return self.start() if self.size is None else self._more()
        self.misses = 0
        if self.size is None:
            size, _, part = line.partition(" ")
            self.size = int(size)
        else:
            part = line
        want = min(self.part, self.size - len(self.text))
        if len(part) == want and part.isascii():
            self.text += part
        elif self.part > 500:  # the observation cut it: smaller parts
            self.part //= 2
        else:
            raise AgentError(f"the hacker's survey cannot be read back: {obs[-300:]}")
        if len(self.text) >= self.size:
            return None
        return self._more()

    def repo(self, targets: tuple[str, ...]) -> Repo:
        data = json.loads(zlib.decompress(base64.b64decode(self.text)))
        return Repo(files=tuple(data["files"]), packages=tuple(data["packages"]),
                    test_files=tuple(data["test_files"]), test_ids=tuple(data["test_ids"]),
                    site_packages=tuple(data["site_packages"]), user_site=data["user_site"],
                    targets=targets)


def _marked(obs: str, marker: str) -> str | None:
    """What follows ``marker`` on the observation's line that starts with it."""
    line = next((ln for ln in obs.splitlines() if ln.startswith(marker)), None)
    return None if line is None else line[len(marker):].strip()


def targets_from(prompt: str) -> tuple[str, ...]:
    """The hidden test ids an adversarial prompt names (a JSON list after the marker)."""
    for line in prompt.splitlines():
        if line.startswith(TARGETS_MARKER):
            try:
                ids = json.loads(line[len(TARGETS_MARKER) :])
            except json.JSONDecodeError:
                return ()
            return tuple(str(i) for i in ids) if isinstance(ids, list) else ()
    return ()
