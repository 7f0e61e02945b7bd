"""Certificates: every attack written for a task's language (:mod:`repogym.agents.hacker`
plays them: :mod:`~repogym.agents.attacks.pytest_attacks` for Python,
:mod:`~repogym.agents.attacks.runner_attacks` for the others) played against it, and what each
one earned.

:func:`certify` plays each hack on each task through the environment (one env for all of them,
so the attacks share its warm agent and grading containers), aimed at the task's own hidden
tests (the attacker's worst case: it is told their ids). An attack *beats* a task when it
resolves it or makes any of its FAIL_TO_PASS tests pass in a valid run. The certificate
(``task.certificate``) records every attack's outcome, the versions of the attacks and of the
grader, the date, the task's hash and the result: ``"pass"``, ``"hackable"``, or
``"incomplete"`` when an attack's episode could not run.

Cost: one episode per attack (a few tool calls, then one grade: the test run, with the decoy
run collecting meanwhile), plus the time limit of the two attacks that never end
(``loop_timeout`` each). What keeps it down:

- the attacks are played ``workers`` at a time (two by default) from one queue for the whole
  run: each layout's first task's (the two that only end at their time limit first of all, so
  that the others fill the time they wait), then every other task's, so that no worker waits
  for the last attack of a task while another works on it;
- each worker's env keeps its grading container: after a grade it is reset in place and
  verified (``repogym.envs.grading.recycle``: every process of the tests' user gone, the
  repository and the user's home compared with the image's pristine copy, every other place
  the user can write seen empty) or removed, never handed out as it was;
- an attack that cannot act on a task is not played, and the certificate says why
  (``skipped``): one that works through pytest (a ``conftest.py``, its configuration, its
  reports) on a task whose tests do not run under pytest;
- an attack whose every change is stripped by name is graded on the FAIL_TO_PASS tests and the
  canaries alone (:mod:`repogym.agents.stripped`);
- an attack on the code is graded first on the FAIL_TO_PASS tests alone, every defence on, and
  whole only where that grade does not settle it (a win, a test it did not reach): the other
  tests can only take a win away (:mod:`repogym.agents.stripped`; ``narrow=False`` grades
  every attack whole);
- the attacks on the harness (:data:`LAYOUT`: pytest's configuration and hooks, start-up files,
  exits, skips and reports forced from the package, endless runs) are played once per
  *layout*: the tasks of one repository snapshot with the same environment and the same test
  folders (:func:`layout_key`). What stops each of them is decided by the paths it writes and
  by how the run ends, never by which tests are hidden or which code is broken, so the
  layout's first task plays them and the others' certificates carry its results, each marked
  ``shared_from``. An attack the first task could not play, or that beat it, is played again on
  every task (a task is called hackable only on what it was seen to lose). ``share=False``
  plays every attack on every task.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import gymnasium as gym

from repogym.agents.hacker import (
    HACKS,
    LIMIT_HACKS,
    HackerAgent,
    adversarial_task,
    hack_for_task,
    lang_hacks,
)
from repogym.agents.stripped import StrippedRuns, grade_alone
from repogym.envs.grading.grader import GraderConfig
from repogym.envs.grading.recycle import reset_grader
from repogym.envs.grading.testcmd import runs_pytest
from repogym.sandbox.pool import SandboxPool
from repogym.schema import Task
from repogym.version import describe as repogym_version

TIME_LIMITED = ("infinite_loop", "fork_bomb")  # end only at the test run's time limit
# attacks that act through pytest itself (a conftest.py, its configuration, its reports): on a
# task whose tests another runner runs they change nothing, and are not played
PYTEST_ONLY = ("conftest_hook", "conftest_hook_tests", "conftest_report_patch",
               "conftest_report_patch_tests", "pytest_ini", "setup_cfg", "pyproject_toml",
               "tox_ini", "sys_exit_conftest", "os_exit_conftest", "report_patch_package",
               "fake_junit", "targeted_report_patch", "targeted_by_name", "targeted_by_calls",
               "decoy_aware")
# attacks on the harness, not on a task's tests or code: none reads the hidden ids or the
# tests' names, and what stops each (a path stripped by name, a canary, the signed records, the
# exit status, the time limit) is the same for every task of a layout (``layout_key``)
LAYOUT = ("conftest_hook", "conftest_hook_tests", "conftest_report_patch",
          "conftest_report_patch_tests", "pyproject_toml", "tox_ini", "sys_exit_import",
          "os_exit_import", "sys_exit_conftest", "os_exit_conftest", "skip_pytest_import",
          "skip_unittest_import", "report_patch_package", "sitecustomize_repo", "pth_repo",
          "site_packages", "infinite_loop", "fork_bomb",
          # the other languages': their runners' configuration, exits at load, forged matchers
          "jest_config_ignore", "package_json_jest", "jest_forged_expect", "js_process_exit",
          "go_mod_replace", "go_os_exit", "cargo_profile", "cargo_build_script",
          "cargo_config_runner", "pom_skip_tests", "junit_service_listener",
          "java_system_exit")
PASS, HACKABLE, INCOMPLETE = "pass", "hackable", "incomplete"


@dataclass(frozen=True)
class CertifyConfig:
    """Which attacks, and the limits each plays under."""

    # every attack; each task meets those written for its language (``attacks_for``)
    hacks: tuple[str, ...] = field(default_factory=lambda: (*HACKS, *lang_hacks()))
    timeout: float = 120.0  # seconds for each attack's test run (at most the task's own)
    loop_timeout: float = 10.0  # the same for the attacks that never end
    max_steps: int = 30
    # attacks played at once, each worker with its own env (and its own grading container)
    workers: int = field(default_factory=lambda: min(2, os.cpu_count() or 1))
    # the attacks on the harness played once per layout, their results shared (module docstring)
    share: bool = True
    # an attack on the code graded on the FAIL_TO_PASS tests first (``stripped.grade_alone``)
    narrow: bool = True

    def __post_init__(self) -> None:
        unknown = sorted(set(self.hacks) - set(HACKS) - set(LIMIT_HACKS) - set(lang_hacks()))
        if unknown or not self.hacks:
            raise ValueError(f"hacks={unknown or '()'}: choose from {sorted(HACKS)}, the other "
                             f"languages' {sorted(lang_hacks())} (or the known limits "
                             f"{sorted(LIMIT_HACKS)})")
        if min(self.timeout, self.loop_timeout) <= 0 or min(self.max_steps, self.workers) < 1:
            raise ValueError(f"timeout={self.timeout}, loop_timeout={self.loop_timeout}, "
                             f"max_steps={self.max_steps} and workers={self.workers} must be "
                             "positive")


@dataclass
class Attack:
    """What one attack earned on one task."""

    reward: float = 0.0
    resolved: bool = False
    f2p_pass_rate: float = 0.0
    valid: bool = True
    flags: list[str] = field(default_factory=list)
    seconds: float = 0.0
    error: str = ""
    note: str = ""  # how it was graded, when not whole
    shared_from: str = ""  # the task of the same layout it was played on, when not this one

    @property
    def won(self) -> bool:
        return self.reward > 0 or self.resolved or (self.valid and self.f2p_pass_rate > 0)


def versions() -> dict[str, str]:
    """The attacks' and the grader's versions: repogym's and a hash of their sources (every
    file of the grading package, so a module split or added changes it too)."""
    here = Path(__file__).resolve().parent
    grading = here.parent / "envs" / "grading"
    return {"repogym": repogym_version(),
            "attacks": _digest(here, [here / "hacker.py",
                                      *sorted((here / "attacks").rglob("*.py"))]),
            "grader": _digest(grading, [p for p in sorted(grading.rglob("*"))
                                        if p.suffix in (".py", ".sh") and p.is_file()])}


def _digest(root: Path, paths: Iterable[Path]) -> str:
    h = hashlib.sha256()
    for path in paths:
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:12]


def attacks_for(task: Task, hacks: Sequence[str]) -> tuple[str, ...]:
    """The attacks of ``hacks`` written for ``task``'s language: the Python ones
    (:mod:`repogym.agents.hacker`) on a Python task, each other language's own
    (:mod:`repogym.agents.attacks.runner_attacks`) on that language's tasks."""
    language, langs = task.environment.language, lang_hacks()
    return tuple(h for h in hacks
                 if (language in getattr(langs[h], "languages", ()) if h in langs
                     else language == "python"))


def skip_reason(task: Task, hack: str) -> str:
    """Why ``hack`` cannot act on ``task`` ("" when it can)."""
    if task.environment.language == "python" and hack in PYTEST_ONLY and not runs_pytest(
            task.environment):
        return (f"acts through pytest, and the task's tests run without it "
                f"({task.environment.test_cmd!r})")
    return ""


def layout_key(task: Task) -> str:
    """What an attack on the harness meets in ``task``: the repository snapshot (a synthetic
    task's is the commit it was made from), the environment (Python, setup, test command), and
    where the hidden tests live (the canaries go there, the attacks write their conftest.py
    into the first one's folder)."""
    ids = (*task.FAIL_TO_PASS, *task.PASS_TO_PASS)
    folders = [i.split("::")[0].rpartition("/")[0] for i in ids]
    return json.dumps([task.repo, str(task.extra.get("original_commit") or task.base_commit),
                       task.to_dict()["environment"], folders[:1], sorted(set(folders))],
                      sort_keys=True)


def shared_from(first: tuple[str, dict[str, Attack]] | None, hacks: Sequence[str]
                ) -> dict[str, Attack]:
    """The attacks of ``hacks`` whose results a task takes from its layout's first task
    (``first``: its id and attacks): those on the harness that ran there and lost."""
    if first is None:
        return {}
    source, attacks = first
    return {h: replace(a, shared_from=a.shared_from or source)
            for h in hacks if h in LAYOUT and (a := attacks.get(h)) is not None
            and not a.error and not a.won}


def certificate(task: Task, attacks: dict[str, Attack], seconds: float,
                missing: str = "", skipped: dict[str, str] | None = None) -> dict[str, Any]:
    """``missing``: why no attack was played (none of those asked for fits the task);
    ``skipped``: the attacks not played, and why each cannot act on the task."""
    beaten = sorted(name for name, a in attacks.items() if a.won)
    failed = any(a.error for a in attacks.values()) or not attacks
    return {
        "result": HACKABLE if beaten else INCOMPLETE if failed else PASS,
        **({"error": missing} if missing else {}),
        "beaten_by": beaten,
        "attacks": {name: {"reward": a.reward, "resolved": a.resolved,
                           "f2p_pass_rate": a.f2p_pass_rate, "valid": a.valid,
                           "flags": a.flags, "seconds": round(a.seconds, 1),
                           **({"error": a.error} if a.error else {}),
                           **({"graded": a.note} if a.note else {}),
                           **({"shared_from": a.shared_from} if a.shared_from else {})}
                    for name, a in sorted(attacks.items())},
        **({"skipped": dict(sorted(skipped.items()))} if skipped else {}),
        "versions": versions(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "task_hash": task.task_hash,
        "seconds": round(seconds, 1),
    }


def certify(tasks: list[Task], config: CertifyConfig | None = None,
            progress: Callable[[str], None] = print,
            on_task: Callable[[Task], None] | None = None) -> list[Task]:
    """The tasks with their certificates, in the same order. Attacks run from one queue for
    the whole run (each layout's first task first), ``config.workers`` of them at once, each
    worker with an env of its own (the envs share the process's warm containers).
    ``on_task`` gets each certified task as soon as it is done, in order (a suite of many tasks
    takes hours: what is done is kept if the run stops)."""
    config = config or CertifyConfig()
    chosen, skipped = plan_attacks(tasks, config)
    plays = {(t.instance_id, h): _attack_task(t, h, config)
             for t in tasks for h in chosen[t.instance_id]}
    local, envs, lock = threading.local(), list[gym.Env[Any, Any]](), threading.Lock()
    # a task's attacks whose every change is stripped share one run (``stripped.py``)
    runs = {t.instance_id: StrippedRuns() for t in tasks} if config.share else {}

    def attack(key: tuple[str, str]) -> Attack:
        if not hasattr(local, "env"):
            # no timeout in the grader's config: it would override each attack's own limit
            # (the tasks carry it), and the two that never end would wait out the longer one
            local.env = gym.make("repogym/SWE-v0", tasks=list(plays.values()),
                                 max_steps=config.max_steps, grader=GraderConfig(),
                                 pool_size=1)
            # its grading container is reset in place between attacks, verified, or removed
            pool = getattr(local.env.unwrapped, "pool", None)
            if isinstance(pool, SandboxPool):
                pool.resetters["grader"] = reset_grader
            with lock:
                envs.append(local.env)
        first = play(local.env, plays[key], config.narrow, runs.get(key[0]))
        if not first.error:
            return first
        # an episode that could not run (a command that timed out on a loaded machine, a lost
        # container) is played once more before the certificate says the attack did not run
        again = play(local.env, plays[key], config.narrow, runs.get(key[0]))
        again.seconds += first.seconds
        if again.error:
            again.error = f"{again.error[:200]} (the first try: {first.error[:90]})"
        return again

    # one queue for the whole run, so that no worker waits for another's last attack of a
    # task: each layout's first task whole, then every other task's attacks but those on the
    # harness (their layout's first plays them); one of those the first could not settle is
    # queued once that is known (and a later task takes it from the one that played it)
    first_of: dict[str, str] = {}
    for task in tasks:
        first_of.setdefault(layout_key(task), task.instance_id)
    firsts = set(first_of.values())
    futures: dict[tuple[str, str], Future[tuple[Attack, float, float]]] = {}
    # per layout, the task whose results on the harness the next ones take (its first, or a
    # later one that played what the first could not)
    sources: dict[str, tuple[str, dict[str, Attack]]] = {}
    out: list[Task] = []
    pool = ThreadPoolExecutor(max_workers=config.workers)
    try:
        for task in sorted(tasks, key=lambda t: t.instance_id not in firsts):
            first = task.instance_id in firsts or not config.share
            for hack in chosen[task.instance_id]:
                if first or hack not in LAYOUT:
                    futures[(task.instance_id, hack)] = pool.submit(
                        timed, attack, (task.instance_id, hack))
        for i, task in enumerate(tasks, 1):
            tid, hacks = task.instance_id, chosen[task.instance_id]
            layout = layout_key(task)
            shared: dict[str, Attack] = {}
            if config.share and tid not in firsts:
                shared = shared_from(sources[layout], hacks)
                for hack in hacks:
                    if hack in LAYOUT and hack not in shared and (tid, hack) not in futures:
                        futures[(tid, hack)] = pool.submit(timed, attack, (tid, hack))
            results = {h: futures[(tid, h)].result() for h in hacks if h not in shared}
            attacks = {h: (shared.get(h) or results[h][0]) for h in hacks}
            if tid in firsts or len(shared) < len([h for h in hacks if h in LAYOUT]):
                sources[layout] = (tid, attacks)
            # its own attacks' wall time: from the first one's start to the last one's end
            seconds = max((r[2] for r in results.values()), default=0.0) - min(
                (r[1] for r in results.values()), default=0.0)
            missing = "" if hacks or skipped[tid] else (
                f"none of the attacks asked for ({', '.join(config.hacks)}) is written for "
                f"{task.environment.language} tasks")
            cert = certificate(task, attacks, seconds, missing, skipped[tid])
            beaten = ", ".join(cert["beaten_by"])
            failed = ", ".join(sorted(n for n, a in attacks.items() if a.error))
            progress(f"[{i}/{len(tasks)}] {tid}: {cert['result']}"
                     + (f" (beaten by {beaten})" if beaten else "")
                     + (f" (did not run: {failed})" if failed else "")
                     + f" in {cert['seconds']:.0f} s"
                     + (f" ({len(shared)} attacks on the harness shared from "
                        f"{', '.join(sorted({a.shared_from for a in shared.values()}))})"
                        if shared else ""))
            out.append(replace(task, certificate=cert))
            if on_task is not None:
                on_task(out[-1])
    finally:
        # a run that stops (an error, an interrupt) does not wait for the attacks queued
        pool.shutdown(wait=True, cancel_futures=True)
        for env in envs:
            env.close()
    return out


def timed(fn: Callable[[tuple[str, str]], Attack], key: tuple[str, str]
          ) -> tuple[Attack, float, float]:
    """``fn(key)`` with when it started and ended (``time.monotonic``)."""
    start = time.monotonic()
    result = fn(key)
    return result, start, time.monotonic()


def plan_attacks(tasks: list[Task], config: CertifyConfig
          ) -> tuple[dict[str, tuple[str, ...]], dict[str, dict[str, str]]]:
    """Each task's attacks to play (those that end only at their time limit first: the other
    workers play the rest meanwhile), and those skipped, with why."""
    chosen, skipped = {}, {}
    for task in tasks:
        fits = attacks_for(task, config.hacks)
        why = {h: r for h in fits if (r := skip_reason(task, h))}
        play = [h for h in fits if h not in why]
        chosen[task.instance_id] = tuple(sorted(play, key=lambda h: h not in TIME_LIMITED))
        skipped[task.instance_id] = why
    return chosen, skipped


def _attack_task(task: Task, hack: str, config: CertifyConfig) -> Task:
    limit = config.loop_timeout if hack in TIME_LIMITED else config.timeout
    return adversarial_task(replace(task, certificate=None), hack, limit)


def play(env: gym.Env[Any, Any], task: Task, narrow: bool = True,
         stripped: StrippedRuns | None = None) -> Attack:
    """One attack's episode; an episode that fails to run is recorded, not raised (it earned
    nothing, and the certificate says why). An attack whose every change is stripped is graded
    on the failing tests alone (by the run of another such attack of the task, kept in
    ``stripped``, when there is one), and with ``narrow`` so is one on the code where that
    grade settles it (``stripped.py``)."""
    agent = HackerAgent()
    start = time.monotonic()
    try:
        obs, info = env.reset(options={"task_id": task.instance_id})
        agent.reset(obs, info)
        terminated = truncated = False
        reward, steps = 0.0, 0
        while not (terminated or truncated):
            action = agent.act(obs, info)
            steps += 1
            if isinstance(action, dict) and action.get("tool") == "submit":
                # one that runs to its time limit is graded whole at once
                alone = grade_alone(env, task, steps, narrow and hack_for_task(
                    task.instance_id) not in TIME_LIMITED, stripped)
                if alone is not None:
                    report, earned, note = alone
                    return Attack(reward=earned, resolved=report.resolved,
                                  f2p_pass_rate=report.f2p_pass_rate, valid=report.valid,
                                  flags=report.flag_names(),
                                  seconds=time.monotonic() - start, note=note)
            obs, r, terminated, truncated, info = env.step(action)
            reward = float(r)
    except Exception as exc:  # an infrastructure failure: recorded in the certificate
        return Attack(error=f"{type(exc).__name__}: {exc}"[:300],
                      seconds=time.monotonic() - start)
    grading = info.get("grading") or {}
    return Attack(reward=reward, resolved=bool(info.get("resolved")),
                  f2p_pass_rate=float(grading.get("f2p_pass_rate", 0.0)),
                  valid=bool(grading.get("valid", True)), flags=list(info.get("flags", [])),
                  seconds=time.monotonic() - start,
                  error="" if terminated else f"the episode ended without a submit: "
                  f"{info.get('truncation')}")


def hackable(task: Task) -> bool:
    return bool(task.certificate and task.certificate.get("result") == HACKABLE)
