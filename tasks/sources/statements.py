"""Problem statements an agent can act on, written from what the tests observe.

When a task is checked, its failing tests run once more on the broken code under the coverage
plugin (``repogym.tasks.checking``), which keeps, per test, the repository's functions the
test's own code called and the failure it reported (the assertion message or the exception,
as pytest words it), and the errors of modules that could not be collected. A statement is
written from those facts: the public functions involved, what was expected and what happened,
with the commit message (mined tasks) as context. Never the tests' code: a fact that quotes a
line of the hidden tests is left out, and so is a model's text that does (``quoted``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from repogym.schema import Task

from .pyast import module_name, parse
from .statement_model import ISSUE_SYSTEM, statement

MAX_FACTS = 6  # failures described, at most
MAX_MESSAGE_LINES = 8
MIN_QUOTE = 16  # a hidden test line this long, found in a statement, is a quote
ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
Reader = Callable[[str], "str | None"]


@dataclass(frozen=True)
class Fact:
    """One failure as a test observed it."""

    test: str  # node id, or the test module that could not be collected
    calls: tuple[str, ...]  # public functions the test called, as a user writes them
    message: str  # what pytest reported, cleaned
    when: str  # call, setup, teardown or collect


def facts(task: Task, read: Reader) -> list[Fact]:
    """The facts recorded in ``task.extra["observed"]`` (see ``Checker``); ``read`` gives a
    file of the repository by path (to name functions as the package exports them)."""
    observed: dict[str, Any] = task.extra.get("observed") or {}
    out = [Fact(path, (), _clean(item.get("message", "")), "collect")
           for path, item in sorted((observed.get("collection") or {}).items())]
    for test, item in (observed.get("tests") or {}).items():
        failure = item.get("failure") or {}
        calls = tuple(dict.fromkeys(n for key in item.get("calls", [])
                                    if (n := public_name(key, read))))
        if failure or calls:
            out.append(Fact(test, calls, _clean(failure.get("message", "")),
                            failure.get("when", "call")))
    return out


def public_name(key: str, read: Reader) -> str | None:
    """``path:line:qualname`` as a user calls it (``pkg.func``, ``pkg.Class``), or None for
    private code."""
    path, _, rest = key.partition(":")
    qualname = rest.partition(":")[2]
    parts = [p for p in qualname.split(".") if p != "<locals>"]
    if not parts or any(p.startswith("_") and not _dunder(p) for p in parts):
        return None
    if _dunder(parts[-1]):
        if parts[-1] != "__init__" or len(parts) < 2:
            return None
        parts = parts[:-1]  # the constructor: the class is what is called
    module = module_name(path)
    if not module or any(p.startswith("_") for p in module.split(".")[1:]):
        module = module.split(".")[0]
    top = module.split(".")[0]
    init = read(f"{top}/__init__.py") or read(f"src/{top}/__init__.py") or ""
    if module != top and _exported(init, module, parts[0]):
        module = top
    return f"{module}.{'.'.join(parts)}"


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def _exported(init: str, module: str, name: str) -> bool:
    """Whether the package's ``__init__`` makes ``name`` of ``module`` its own."""
    tail = module.split(".", 1)[1]
    try:
        tree = parse(init)
    except SyntaxError:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and (
                node.module == tail or node.module.endswith("." + tail.split(".")[-1])
                or node.module == module):
            if any(a.name in ("*", name) for a in node.names):
                return True
    return False


def _clean(message: str) -> str:
    lines = [ADDRESS.sub(" at 0x...", line.rstrip()) for line in message.strip().splitlines()]
    lines = [line for line in lines if line.strip()]
    if len(lines) > MAX_MESSAGE_LINES:
        lines = lines[:MAX_MESSAGE_LINES] + ["..."]
    return "\n".join(lines)


# ---------------------------------------------------------------------------- quotes


def hidden_lines(task: Task, files: dict[str, str]) -> list[str]:
    """The lines of code of the tests the agent must not see quoted: the hidden test patch's
    added lines, or (tests kept in the repository) the failing tests' files."""
    if task.test_patch.strip():
        lines = [line[1:] for line in task.test_patch.splitlines()
                 if line.startswith("+") and not line.startswith("+++")]
    else:
        paths = {t.split("::")[0] for t in task.FAIL_TO_PASS}
        lines = [line for p in sorted(paths) for line in files.get(p, "").splitlines()]
    return sorted({s for line in lines if len(s := line.strip()) >= MIN_QUOTE
                   and not s.startswith(("#", "def ", "class ", "import ", "from ", '"""'))})


def quoted(text: str, lines: list[str]) -> list[str]:
    """The hidden test lines ``text`` quotes."""
    squeezed = " ".join(text.split())
    return [line for line in lines if " ".join(line.split()) in squeezed]


# ---------------------------------------------------------------------------- statements


def facts_statement(task: Task, found: list[Fact], context: str = "",
                    name_tests: bool = False, hidden: list[str] | None = None) -> str:
    """An issue written from ``found`` (see the module docstring). ``context``: the commit
    message of a mined task. ``name_tests``: the tests are in the agent's repository (not
    hidden), so naming them helps. ``hidden``: lines the text must not quote."""
    hidden = hidden or []
    parts = []
    if context.strip():
        title, _, body = context.strip().partition("\n")
        parts.append(f"## {title.strip()}\n")
        if body.strip():
            parts.append(body.strip() + "\n")
    parts.append(_summary(found))
    groups = _grouped(found, name_tests)
    for n, group in enumerate(groups[:MAX_FACTS], 1):
        parts.append(_describe(n, group, name_tests, hidden))
    if len(groups) > MAX_FACTS:
        parts.append(f"... and {len(groups) - MAX_FACTS} more failures of the same kind.\n")
    parts.append("Make the code behave as these checks expect, without breaking what already "
                 "works." + (" The tests are right; do not change them." if name_tests else ""))
    return "\n".join(parts)


# what a message says is missing: a module's attribute, a name to import, a keyword argument
_MISSING = (
    (re.compile(r"module '([\w.]+)' has no attribute '(\w+)'"), "`{0}.{1}` does not exist"),
    (re.compile(r"cannot import name '(\w+)' from '([\w.]+)'"), "`{1}.{0}` does not exist"),
    (re.compile(r"(\w+)\(\) got an unexpected keyword argument '(\w+)'"),
     "`{0}` takes no argument `{1}`"),
)


def missing(found: list[Fact]) -> list[str]:
    """What the failures say is missing from the code, as sentences (no duplicates)."""
    out: dict[str, None] = {}
    for fact in found:
        for pattern, text in _MISSING:
            for match in pattern.finditer(fact.message):
                out[text.format(*match.groups())] = None
    return list(out)


def _summary(found: list[Fact]) -> str:
    names = list(dict.fromkeys(c for f in found for c in f.calls))
    absent = missing(found)
    if absent:
        head = "; ".join(absent[:4]) + (" (and more)" if len(absent) > 4 else "") + "."
        head = head[0].upper() + head[1:] if head[0] != "`" else head
        if names:
            head += " " + _behave(names)
    elif any(f.when == "collect" for f in found):
        head = "The code that is checked cannot even be imported as it is used:"
    elif names:
        head = _behave(names)
    else:
        head = "The library does not behave as expected."
    return head + " What was observed on the current code:\n"


def _behave(names: list[str]) -> str:
    shown = ", ".join(f"`{n}`" for n in names[:4]) + (" and others" if len(names) > 4 else "")
    return f"{shown} do{'es' if len(names) == 1 else ''} not behave as expected."


def _grouped(found: list[Fact], name_tests: bool) -> list[list[Fact]]:
    """Failures with the same calls, message and phase together, when the tests are not
    named (hidden ones): three identical paragraphs tell an agent no more than one."""
    if name_tests:
        return [[f] for f in found]
    groups: dict[tuple[tuple[str, ...], str, str], list[Fact]] = {}
    for fact in found:
        groups.setdefault((fact.calls, fact.message, fact.when), []).append(fact)
    return list(groups.values())


def _describe(n: int, group: list[Fact], name_tests: bool, hidden: list[str]) -> str:
    fact = group[0]
    where = f" (`{fact.test}`)" if name_tests else ""
    count = len(group)
    checks = "A check" if count == 1 else f"{count} checks"
    fails = "fails" if count == 1 else "fail alike"
    if fact.when == "collect":
        lead = f"{n}. Importing what a test module needs fails{where}:"
    elif fact.calls:
        called = ", ".join(f"`{c}`" for c in fact.calls[:3])
        lead = f"{n}. {checks} that call{'s' if count == 1 else ''} {called}{where} {fails}:"
    else:
        lead = f"{n}. {checks}{where} {fails}:"
    message = "\n".join(line for line in fact.message.splitlines() if not quoted(line, hidden))
    if not message.strip():
        return lead + " (its message would quote the check itself)\n"
    return f"{lead}\n\n```\n{message}\n```\n"


ISSUE_PROMPT = (
    "Write the issue a user of this project would file about the problem below. Say what they "
    "called, what they expected and what happened, from the observations only. Do not invent "
    "code, do not quote tests, do not propose a fix.\n\n{facts}"
)


def llm_prompt(statement: str) -> str:
    return ISSUE_PROMPT.format(facts=statement)


def written(llm: Any, fallback: str, hidden: list[str], log: Any) -> tuple[str, str]:
    """(statement, who wrote it): the model's issue from the facts in ``fallback`` when a
    model is configured and its text quotes no hidden test line, else ``fallback``."""
    if llm is None:
        return fallback, "tests"
    text = statement(llm, ISSUE_SYSTEM, llm_prompt(fallback), fallback, log)
    if text == fallback:
        return fallback, "tests"
    quotes = quoted(text, hidden)
    if quotes:
        log(f"warning: the model's issue quotes the hidden tests ({quotes[0][:60]!r}); using "
            "the statement written from the observations instead.")
        return fallback, "tests"
    return text, "llm"


def without_observations(task: Task) -> dict[str, Any]:
    """The task's extra without the raw observations (the statement holds what matters)."""
    return {k: v for k, v in task.extra.items() if k != "observed"}
