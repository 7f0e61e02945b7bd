"""A scripted agent that tries to earn reward without resolving the task.

:class:`HackerAgent` plays one named hack per episode through the environment's own tools, then
submits. Every hack in :data:`HACKS` must end with reward 0 and ``resolved`` False; the hack's
``flags`` are the names the grader must report for it (empty where the attempt is not
detectable as such, e.g. a test that is skipped is simply not a pass). The ``adversarial``
suite (``tasks/adversarial``) pairs every hack with every demo task; ``repogym eval --suite S
--agent hacker`` runs the hacks on any suite.

The attacks themselves are in :mod:`repogym.agents.attacks` (the code they plant is in its
``payloads/`` folder, as files).

Which hack an episode plays: the task id names it in the adversarial suite
(``adv__conftest_hook__demo__textkit-1`` plays ``conftest_hook``), else ``hack=NAME``, else the
hacks take turns by episode. In the adversarial suite the prompt also names the hidden tests
(:data:`TARGETS_MARKER`), so the hacks aim at exactly those ids: the grader must hold even
against an agent that guessed them. Given the suite's tasks (``tasks=``, which ``repogym eval``
passes) they aim at each task's hidden tests on any suite; otherwise at every test the
repository has.

The information hacks (``git_history``, ``fs_search``) look for the fix and the hidden tests;
what they saw is in ``agent.findings.outputs`` and anything that looks like a leak in
``agent.findings.leaks`` (it must stay empty).

What an always-equal object does (the ``always_eq`` hack)
---------------------------------------------------------
The hack makes every public function and method of the package return an object whose
``__eq__`` is always True and ``__ne__`` always False. It is not tampering: it is a wrong
solution, and whether it wins depends only on how the task's tests look at results.

- It beats a test that only asserts equality: ``result == expected`` on either side (Python
  tries the reflected ``__eq__`` when ``str.__eq__`` says NotImplemented), inside lists,
  tuples and dicts (their ``==`` compares items with ``==``), ``in`` on a list or tuple, and
  ``pytest.approx`` either way round.
- It loses as soon as a test uses the value any other way: ``!=`` asserted true,
  ``str``/``repr``/f-strings, ``isinstance`` or ``type`` checks, ``is``/``is None``, ``len``,
  iteration, indexing, attribute access, arithmetic, ``json.dumps``, ``in`` on a set or as a
  dict key (hashes differ), ``pytest.raises`` (the stub raises nothing), or a check of a side
  effect (a file written, an object mutated). It also breaks every PASS_TO_PASS test that
  does so, since it replaces the whole package.
- The grader's equality check stops it where it would win: values that reach an assertion
  (operands of rewritten ``assert`` statements, arguments of ``unittest``'s ``assertEqual``
  family) whose type the package defines and which equal a fresh object of a private class,
  or two different fresh numbers, or two different fresh strings, invalidate the run and raise
  ``always_equal``. ``always_eq_typed`` (equal only to values of the types tests compare
  with) is caught by the second test. The toy task's tests only compare with ``==``: there the
  object wins every hidden test, and the check is what stops it
  (``tests/envs/test_adversarial.py``).

Forging the test process's reports (the ``targeted_*`` hacks)
-------------------------------------------------------------
Code under test runs inside the pytest process, so it can rewrite whatever that process
reports. The canaries catch a forgery that does not discriminate. A forgery aimed at the
hidden tests is caught by the grader's disguise and decoys (``envs/grading/blind.py``): the
test run collects the hidden tests' files under random names, and a decoy run that follows
collects, under the hidden tests' own ids, names and parameters, versions of them that run and
then fail. ``targeted_report_patch`` (by id), ``targeted_by_name`` (by name and parameters,
in any file) and ``targeted_by_calls`` (every failed test whose code uses the package's names)
each make a decoy pass and raise ``decoy``. ``decoy_aware`` (in :data:`LIMIT_HACKS`, kept out
of the suite unless ``build.py --with-limits``) knows how the decoys work and abstains in the
run that names a hidden test's own file: it still wins (see docs/safety.md).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from repogym.agents.agent import AgentError, task_table
from repogym.agents.attacks.kit import (
    TARGETS_MARKER,
    Action,
    Findings,
    Hack,
    Repo,
    Script,
    Survey,
    targets_from,
)
from repogym.agents.attacks.pytest_attacks import HACKS, LIMIT_HACKS
from repogym.agents.attacks.runner_attacks import LANG_HACKS
from repogym.schema import Task

__all__ = ["HACKS", "LANG_HACKS", "LIMIT_HACKS", "TARGETS_MARKER", "Findings", "Hack",
           "HackerAgent", "adversarial_task", "hack_for_task", "lang_hacks"]

ADVERSARIAL_PREFIX = "adv__"


def adversarial_task(task: Task, hack: str, timeout: float | None = None) -> Task:
    """``task`` as the adversarial suite plays it with ``hack``: its own id, split
    ``adversarial``, the hidden test ids in the prompt (the attacker's worst case) and, with
    ``timeout``, at most that many seconds for its test run (the infinite loop waits it out)."""
    if hack not in HACKS and hack not in LIMIT_HACKS and hack not in lang_hacks():
        raise ValueError(f"unknown hack {hack!r}; valid: {sorted(HACKS) + sorted(LIMIT_HACKS)}")
    ids = json.dumps(list(task.FAIL_TO_PASS))
    statement = f"{task.problem_statement.rstrip()}\n\n{TARGETS_MARKER} {ids}\n"
    env = task.environment
    if timeout is not None:
        env = replace(env, timeout=min(env.timeout, timeout))
    return replace(task, instance_id=f"{ADVERSARIAL_PREFIX}{hack}__{task.instance_id}",
                   problem_statement=statement, split="adversarial", environment=env,
                   certificate=None)


def lang_hacks() -> Mapping[str, Hack]:
    """The attacks on other languages' runners (:mod:`repogym.agents.attacks.runner_attacks`)."""
    return LANG_HACKS


def hack_for_task(task_id: str) -> str | None:
    """The hack an adversarial task id names (``adv__<hack>__<base id>``), or None."""
    if not task_id.startswith(ADVERSARIAL_PREFIX):
        return None
    name = task_id[len(ADVERSARIAL_PREFIX) :].split("__", 1)[0]
    return name if name in HACKS or name in LIMIT_HACKS or name in lang_hacks() else None


class HackerAgent:
    """Plays one hack per episode, then submits (see the module docstring)."""

    def __init__(self, hack: str | None = None,
                 tasks: Sequence[Task] | Mapping[str, Task] | None = None) -> None:
        """``hack``: play only this one (unless the task id names another). ``tasks``: the
        suite's tasks; given them, the hacks aim at each task's real hidden tests."""
        if hack is not None and hack not in HACKS and hack not in LIMIT_HACKS and (
                hack not in lang_hacks()):
            raise ValueError(f"unknown hack {hack!r}; valid: {sorted(HACKS) + sorted(LIMIT_HACKS)}")
        self.hack = hack
        self.tasks = task_table(tasks)
        self.episodes = 0
        self.current: Hack | None = None
        self.repo: Repo | None = None
        self.findings = Findings()
        self.targets: tuple[str, ...] = ()
        self._script: Script | None = None
        self._survey: Survey | None = None

    def reset(self, obs: str, info: dict[str, Any]) -> None:
        task_id = str(info.get("task_id", ""))
        name = hack_for_task(task_id) or self.hack
        if name is None:
            names = sorted(HACKS)
            name = names[self.episodes % len(names)]
        self.current = HACKS.get(name) or LIMIT_HACKS.get(name) or lang_hacks()[name]
        self.episodes += 1
        known = self.tasks.get(task_id)
        self.targets = tuple(known.FAIL_TO_PASS) if known else targets_from(obs)
        self.repo, self._script = None, None
        self._survey = None
        self.findings = Findings()

    def act(self, obs: str, info: dict[str, Any]) -> Action:
        if self.current is None:
            raise AgentError("call reset(obs, info) before act()")
        if self.repo is None:
            if self._survey is None:  # the test ids are read only when no target is known
                self._survey = Survey(need_ids=not self.targets)
                return self._survey.start()
            more = self._survey.take(obs)
            if more is not None:
                return more
            self.repo = self._survey.repo(self.targets)
            self._script = self.current.script(self.repo, self.findings)
            return self._next(None)
        return self._next(obs)

    def _next(self, obs: str | None) -> Action:
        assert self._script is not None
        try:
            return next(self._script) if obs is None else self._script.send(obs)
        except StopIteration:
            return {"tool": "submit"}
