"""Running a task's tests in Docker: deriving FAIL_TO_PASS / PASS_TO_PASS, and validation.

Both go through the same grader the environment uses, so a task that validates here grades
the same way in an episode.
"""

from __future__ import annotations

import math
import re
import shlex
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from repogym.envs.grading.flags import Flag
from repogym.envs.grading.grader import Grader, GraderConfig, GradingReport
from repogym.envs.grading.testcmd import runs_pytest
from repogym.errors import RepogymError, SetupFailed, SourceIncomplete
from repogym.images.repository import ensure_image
from repogym.schema import Environment, Task
from repogym.tasks.played import Played, played
from repogym.tls import explain_certificate

TIMED_OUT = "tests time out with the gold patch"
MARGIN = 3  # a limit raised for slow tests: this many times gold's slowest run
# gold failing in every run, and no run stopped: this many runs more tell a failure from a
# test that passes by chance (sympy__sympy-13146's FAIL_TO_PASS test fails with 3 hash seeds
# of 8, and failed in both validation runs)
CONFIRM = 2


@dataclass(frozen=True)
class Validation:
    instance_id: str
    ok: bool
    reason: str
    gold_resolved: list[bool]
    empty_resolved: list[bool]
    flaky: list[str]  # tests whose status differed between runs of one side, listed or not
    seconds: float
    # each flaky test's statuses, counted per side: {"gold": {"PASSED": 1, "FAILED": 1}, ...}
    flips: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    gold_seconds: list[float] = field(default_factory=list)  # each gold run's tests

    def flaky_listed(self, task: Task) -> list[str]:
        """The flaky tests that the task's lists name (the others decide no grade)."""
        listed = {*task.FAIL_TO_PASS, *task.PASS_TO_PASS}
        return [t for t in self.flaky if t in listed]


def _grade(task: Task, patch: str, runs: int, grader: Grader) -> list[GradingReport]:
    image = ensure_image(task, progress=lambda _m: None)
    return [grader.grade(task, patch, image.tag) for _ in range(runs)]


def _grade_played(task: Task, runs: int, grader: Grader) -> tuple[list[GradingReport], Played]:
    """The gold patch as an agent's diff (``repogym.tasks.played``), graded ``runs`` times."""
    image = ensure_image(task, progress=lambda _m: None)
    diff = played(image, task.patch)
    if diff.problem:
        return [], diff
    return [grader.grade(task, diff.diff, image.tag) for _ in range(runs)], diff


def derive_lists(
    task: Task, runs: int = 2, grader: Grader | None = None
) -> tuple[Task | None, str]:
    """The task with FAIL_TO_PASS and PASS_TO_PASS measured, or (None, why it was rejected)."""
    grader = grader or Grader(GraderConfig(cleanup_async=False))
    bare = task.with_(FAIL_TO_PASS=(), PASS_TO_PASS=())
    try:
        before = _grade(bare, "", runs, grader)
        after = _grade(bare, task.patch, runs, grader)
    except RepogymError as exc:
        return None, error_reason(exc)
    problem = run_problem(before, after)
    if problem:
        return None, problem
    flaky = flaky_tests([r.statuses for r in before]) | flaky_tests([r.statuses for r in after])
    f2p, p2p = measured_lists(before[0].statuses, after[0].statuses, flaky)
    if not f2p:
        return None, no_f2p_reason(after[0])
    return task.with_(FAIL_TO_PASS=tuple(f2p), PASS_TO_PASS=tuple(p2p)), "ok"


NO_F2P = "no test fails before the patch and passes after it"


def error_reason(exc: RepogymError) -> str:
    """A candidate's rejection for an error while building or running its tests."""
    if isinstance(exc, SetupFailed):
        return f"setup fails on this snapshot: {setup_error(str(exc))}"
    if isinstance(exc, SourceIncomplete):
        return str(exc)
    return f"infrastructure: {explain_certificate(str(exc)) or str(exc).splitlines()[0][:200]}"


def run_problem(before: list[GradingReport], after: list[GradingReport],
                gold: str = "with the gold patch") -> str | None:
    """Why runs without (``before``) and with the gold patch (``after``) cannot give a task's
    lists, or None. ``gold`` names the gold side in the reason."""
    if not after[0].patch_applied:
        return "gold patch does not apply"
    if after[0].stripped:
        return f"gold patch touches test paths {sorted(after[0].stripped)[:3]}"
    for rep in before + after:
        if not rep.valid and rep.timed_out:
            return "tests time out"
        if not rep.valid and rep.compiles is False and any(rep is b for b in before):
            # the hidden tests use what the patch adds: before it, their package (or crate, or
            # test classes) does not build, the canaries with it, and every test there fails
            continue
        if (not rep.valid and any(rep is b for b in before) and collects_nothing(rep)
                and all(a.valid for a in after)):
            # the same in Python: without the fix the package does not import (voluptuous: a
            # schema built at import raises), so no test file collects, the canaries' inside
            # the package neither, and every test errors; with it, the run is whole
            continue
        if not rep.valid:
            side = gold if any(rep is a for a in after) else "without it"
            return invalid_reason(rep, side)
    for rep in after:  # a file that does not collect there: no run with it resolves
        if rep.collection_errors:
            error = collection_error(rep.log_tail)
            return (f"tests not collected {gold} ({seen(rep)}): "
                    f"{', '.join(rep.collection_errors[:3])} fail to collect: "
                    f"{error + ' | ' if error else ''}{_last_lines(rep.log_tail)}")
    return None


SNAPSHOT = "at the snapshot itself (every candidate's gold side)"


def collects_nothing(rep: GradingReport) -> bool:
    """Whether a run is invalid only because no test, the canaries included, collected: files
    failed to collect, no test passed or failed, and the canaries' check is all that failed."""
    canaries = set(rep.canaries.values())
    return (bool(rep.collection_errors) and bool(canaries) and canaries <= {"MISSING", "ERROR"}
            and not rep.timed_out
            and not any(s in ("PASSED", "FAILED") for s in rep.statuses.values())
            and all(r.startswith("canary") for r in rep.invalid_reasons))


def uncollected(runs: list[GradingReport]) -> list[str]:
    """The test files that failed to collect in every one of ``runs`` (a snapshot's own runs,
    no change applied) while tests elsewhere passed: files whose imports the project does not
    provide (an sdist that leaves out its tests' helpers). Empty when the runs show another
    problem, or when what fails is a conftest (every test depends on it)."""
    if not runs or any(not rep.valid for rep in runs):
        return []
    if not any(s == "PASSED" for rep in runs for s in rep.statuses.values()):
        return []
    common = set.intersection(*(set(rep.collection_errors) for rep in runs))
    if not all(f.endswith(".py") and Path(f).name != "conftest.py" for f in common):
        return []
    return sorted(common)


def left_out(env: Environment, files: list[str]) -> Environment:
    """``env`` with pytest told to leave ``files`` out of every run."""
    options = " ".join(shlex.quote(f"--ignore={f}") for f in files)
    return replace(env, test_cmd=f"{env.test_cmd} {options}")


def collection_error(log: str, files: list[str] | None = None) -> str:
    """The first error pytest printed while collecting a file (of ``files``, when given):
    ``FILE: ERROR``, or empty."""
    where = ""
    for line in log.splitlines():  # pytest's "_ ERROR collecting F _" sections
        found = re.search(r"ERROR collecting (\S+)", line)
        if found:
            where = found.group(1) if files is None or found.group(1) in files else ""
        elif where and line.startswith("E   "):
            return f"{where}: {line[4:].strip()}"[:200]
    return ""


def collection_errors_said(rep: GradingReport, files: list[str]) -> str:
    """What the snapshot's run said of the ``files`` that did not collect, on one line."""
    first = collection_error(rep.log_tail, files)
    shown = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
    return (f"{len(files)} test file(s) fail to collect {SNAPSHOT} and are left out of its "
            f"tasks' runs: {shown}" + (f" ({first})" if first else ""))


def no_f2p_reason(after: GradingReport) -> str:
    """The rejection of a candidate no test tells apart, and why when the run shows it."""
    if after.shadowed:
        return (f"{NO_F2P}: the tests import {', '.join(after.shadowed[:3])}, not the "
                "repository's code (an installed copy shadows /testbed)")
    return NO_F2P


def measured_lists(before: dict[str, str], after: dict[str, str], flaky: set[str]
                   ) -> tuple[list[str], list[str]]:
    """(FAIL_TO_PASS, PASS_TO_PASS) from one run's statuses on each side: what passes with
    the gold patch and not without it, and what passes on both, flaky tests left out."""
    f2p = sorted(t for t, s in after.items()
                 if s == "PASSED" and before.get(t) != "PASSED" and t not in flaky)
    p2p = sorted(t for t, s in after.items()
                 if s == "PASSED" and before.get(t) == "PASSED" and t not in flaky)
    return f2p, p2p


_SUMMARY = re.compile(r"^=+ (.+?) =+$", re.M)


def seen(rep: GradingReport) -> str:
    """What the run showed: pytest's own summary line (or the counts of the statuses it
    reported) and its exit status."""
    lines = [m.group(1) for m in _SUMMARY.finditer(rep.log_tail)
             if re.search(r"\b(passed|failed|errors?|skipped|no tests ran)\b", m.group(1))]
    if lines:
        summary = lines[-1]
    else:
        counts = Counter(rep.statuses.values())
        summary = ", ".join(f"{n} {s.lower()}" for s, n in sorted(counts.items())) or "no test"
    return f"{summary}; exit status {rep.exit_code}"


def invalid_reason(rep: GradingReport, side: str) -> str:
    """Why a run cannot be used, with what it actually showed."""
    ran = any(s in ("PASSED", "FAILED") for s in rep.statuses.values())
    canaries = set(rep.canaries.values())
    if Flag.CANARY in rep.flags and canaries == {"MISSING"} and ran:
        return (f"canaries not collected {side} although tests ran ({seen(rep)}); they were "
                f"at {rep.canary_note}")
    if Flag.CANARY in rep.flags and canaries == {"MISSING"}:
        error = collection_error(rep.log_tail)
        return (f"tests not collected {side} ({seen(rep)}): "
                f"{error + ' | ' if error else ''}{_last_lines(rep.log_tail)}")
    if Flag.CANARY in rep.flags and canaries <= {"ERROR", "MISSING"} and "PASSED" not in set(
            rep.statuses.values()):
        error = next((line.strip() for line in rep.log_tail.splitlines()
                      if line.startswith("ERROR ")), _last_lines(rep.log_tail))
        return (f"every test errors {side}, the canaries too ({seen(rep)}): the environment "
                f"breaks them (a conftest.py fixture?): {error[:300]}")
    if Flag.CANARY in rep.flags:
        got = ", ".join(f"{k.rsplit('::', 1)[-1]} {v}" for k, v in sorted(rep.canaries.items()))
        return (f"canaries misbehaved {side} ({got}; {seen(rep)}): the test runner is not "
                "plain pytest")
    return f"invalid run {side} ({seen(rep)}): {'; '.join(rep.invalid_reasons)[:300]}"


_SUBPROCESS_OUTPUT = re.compile(r"\[\d+ lines? of output\]\n(.*?)\[end of output\]", re.S)


def setup_error(text: str) -> str:
    """A failed build's cause on one line. pip ends with its own lines ("ERROR: Failed to
    build ...", "note: This error originates from a subprocess"); what the build backend said
    (``error in isodate setup command: use_2to3 is invalid.``) is in the block before them."""
    blocks = _SUBPROCESS_OUTPUT.findall(text)
    said = [line.strip() for line in blocks[-1].splitlines() if line.strip()] if blocks else []
    if not said or explain_certificate(text):
        return _last_lines(text)
    return f"{_last_lines(text, 1)}: " + " | ".join(said[-3:])[:300]


def _last_lines(text: str, n: int = 3) -> str:
    """The end of a build log, where the error is, on one line; a certificate that could not
    be verified is said whole, with what to do (it is often above the last lines, and cut)."""
    certificate = explain_certificate(text)
    if certificate:
        return certificate
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return " | ".join(lines[-n:])[:300]


def outcome(status: str | None) -> str:
    """What a status is worth to a grade: a pass, an expected failure (a pass of
    PASS_TO_PASS, not of FAIL_TO_PASS), or a failure (FAILED, ERROR, SKIPPED, missing)."""
    return status if status in ("PASSED", "XFAIL") else "failing"


def flaky_tests(runs: list[dict[str, str]]) -> set[str]:
    """Tests whose outcome differs between runs (missing from one counts as failing). A test
    that fails one way in one run and another way in the next (ERROR, then FAILED:
    sympy__sympy-13146's FAIL_TO_PASS test without the fix) decides every grade the same."""
    ids = set().union(*runs) if runs else set()
    return {t for t in ids if len({outcome(r.get(t)) for r in runs}) > 1}


def validate_task(task: Task, runs: int = 2, grader: Grader | None = None) -> Validation:
    """Gold resolves the task in every run; the empty patch resolves it in none. Gold is
    played as an agent's change: the diff taken from a container it was applied in is what is
    graded, so a valid task is one an agent who writes the gold change is rewarded for. Gold
    failing in every run runs :data:`CONFIRM` times more: a test that passes by chance then
    shows as flaky (``repogym.tasks.flaky``), not as gold failing."""
    import time

    start = time.monotonic()
    grader = grader or Grader(GraderConfig(cleanup_async=False))
    try:
        gold, diff = _grade_played(task, runs, grader)
        if gold and not any(r.resolved or r.timed_out for r in gold):
            gold += _grade(task, diff.diff, CONFIRM, grader)
        empty = _grade(task, "", runs, grader)
    except SetupFailed as exc:
        return Validation(task.instance_id, False, f"setup fails: {setup_error(str(exc))}", [],
                          [], [], time.monotonic() - start)
    except RepogymError as exc:
        return Validation(
            task.instance_id, False, f"infrastructure: {exc}", [], [], [], time.monotonic() - start
        )
    # a run that timed out was stopped, not measured: its tests' statuses (those it had not
    # reached are missing) say nothing of whether they flip
    finished = {side: [r for r in reports if not r.timed_out]
                for side, reports in (("gold", gold), ("empty", empty))}
    flaky = sorted(flaky_tests([r.statuses for r in finished["gold"]])
                   | flaky_tests([r.statuses for r in finished["empty"]]))
    flips = {t: {side: dict(Counter(r.statuses.get(t, "MISSING") for r in reports))
                 for side, reports in finished.items()} for t in flaky}
    gold_ok = [r.resolved for r in gold]
    empty_ok = [r.resolved for r in empty]
    timed_out = [r for r in gold if r.timed_out]
    reasons = []
    if diff.problem:
        reasons.append(f"gold played as an agent's diff: {diff.problem}")
    elif timed_out:
        reasons.append(f"{TIMED_OUT} ({len(timed_out)} of {len(gold)} "
                       "runs stopped at the time limit)")
    elif not all(gold_ok):
        bad = next(r for r in gold if not r.resolved)
        failing = [
            t
            for t, s in {**bad.fail_to_pass, **bad.pass_to_pass}.items()
            if s not in ("PASSED", "XFAIL", "SKIPPED")
        ]
        why = diff.explain()
        reasons.append(
            f"gold does not resolve it (failing: {failing[:3]}, invalid: {bad.invalid_reasons[:2]}"
            f"{', flags: ' + ', '.join(bad.flag_names()) if bad.flags else ''})"
            + (f": played as an agent's diff, {why}" if why else "")
        )
    if any(empty_ok):
        reasons.append("the empty patch resolves it")
    listed = {*task.FAIL_TO_PASS, *task.PASS_TO_PASS}
    if any(t in listed for t in flaky):  # a flaky test the lists do not name grades nothing
        reasons.append(f"flaky tests: {[t for t in flaky if t in listed][:3]}")
    return Validation(
        task.instance_id,
        not reasons,
        "; ".join(reasons) or "ok",
        gold_ok,
        empty_ok,
        flaky,
        time.monotonic() - start,
        flips,
        [r.test_seconds for r in gold],
    )


def _relaxed(task: Task, result: Validation, relaxed: Task, runs: int, grader: Grader | None,
             note: str) -> tuple[Task, Validation]:
    """``relaxed`` (``task`` with one grading safeguard eased) validated again when ``result``
    is gold failing: kept, saying ``note``, where gold then resolves; else ``task`` as it was."""
    if result.ok or "gold does not resolve" not in result.reason or relaxed == task:
        return task, result
    again = validate_task(relaxed, runs=runs, grader=grader)
    if not again.ok:
        return task, result
    return relaxed, replace(again, reason=f"ok ({note})")


def without_pass_hook(task: Task, result: Validation, runs: int = 2,
                      grader: Grader | None = None) -> tuple[Task, Validation]:
    """A task whose gold fails only while pytest's assertion pass hook is on (the equality
    check's): validated again without it, and kept so when gold then resolves. Some tests
    change with the hook (a freed object outlives the assertion that saw it; pytest's own tests
    of the hook see it set). Only validation, which the agent never reaches, decides this; such
    a task's plain asserts go unseen by the equality check (unittest's are still seen), and its
    certificate says whether an attack then wins."""
    env = task.environment
    if not env.assertion_pass_hook or not runs_pytest(env):
        return task, result
    return _relaxed(task, result, task.with_(environment=replace(env, assertion_pass_hook=False)),
                    runs, grader, "graded without the assertion pass hook: gold fails with it on")


def with_tests_writing(task: Task, result: Validation, runs: int = 2,
                       grader: Grader | None = None) -> tuple[Task, Validation]:
    """A task whose gold fails because its tests write into the repository (a folder beside
    themselves, a file at its root: pylint-dev__pylint-7080), which grading closes to them:
    validated again with those folders open (``environment.tests_write``), and kept so when
    gold then resolves. Only validation decides this; the names pytest and Python read on
    their own stay closed (see ``repogym.envs.grading.stage.open_script``)."""
    env = task.environment
    if env.tests_write or not runs_pytest(env):
        return task, result
    return _relaxed(task, result, task.with_(environment=replace(env, tests_write=True)),
                    runs, grader, "the tests write into the repository: its root and their "
                                  "folders are open to them")



def with_own_names(task: Task, result: Validation, runs: int = 2,
                   grader: Grader | None = None) -> tuple[Task, Validation]:
    """A task whose gold fails because its tests read their own module's name, which the
    disguise changes (sphinx-doc__sphinx-8627: ``restify`` of a class the test module defines
    is to read ``tests.test_util_typing.MyClass1``): validated again undisguised
    (``environment.disguise`` off), and kept so when gold then resolves. Only validation
    decides this; the canaries still run, and the task's certificate says whether a forgery
    aimed at the hidden tests' ids then wins."""
    env = task.environment
    if not env.disguise or not runs_pytest(env):
        return task, result
    return _relaxed(task, result, task.with_(environment=replace(env, disguise=False)),
                    runs, grader, "the tests read their own module's names: the hidden tests "
                                  "run as themselves, with no decoy run")


def relaxations(task: Task, result: Validation, runs: int = 2,
                grader: Grader | None = None) -> tuple[Task, Validation]:
    """Gold failing: each grading safeguard a task's own tests can trip eased in turn (one at a
    time), and the task kept with the first under which gold resolves."""
    for relax in (without_pass_hook, with_tests_writing, with_own_names):
        task, result = relax(task, result, runs=runs, grader=grader)
    return task, result


def with_longer_limit(task: Task, result: Validation, limit: float, runs: int = 2,
                      grader: Grader | None = None) -> tuple[Task, Validation]:
    """A task whose gold runs past its time limit, validated again with ``limit`` (the
    dataset's own harness's: SWE-bench's gives 1800 s), and kept where gold then resolves, its
    limit :data:`MARGIN` times gold's slowest run (at most ``limit``). sympy__sympy-13437's
    ``test_bell`` takes 427 s here, past the 300 s it was validated with."""
    env = task.environment
    if result.ok or not result.reason.startswith(TIMED_OUT) or env.timeout >= limit:
        return task, result
    again = validate_task(task.with_(environment=replace(env, timeout=limit)), runs=runs,
                          grader=grader)
    if not again.ok:
        return task, result
    slowest = max(again.gold_seconds, default=limit)
    raised = float(min(limit, max(env.timeout, math.ceil(MARGIN * slowest))))
    return (task.with_(environment=replace(env, timeout=raised)),
            replace(again, reason=f"ok (gold's tests take {slowest:.0f} s, past the limit of "
                                  f"{env.timeout:g} s: the limit is now {raised:g} s)"))
