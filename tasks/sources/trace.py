"""Recording the cases of differential testing when a replication task is made.

In a container of the task's image with the reference (the gold patch) in place, the tests
that the removal breaks run under a small profiler (:class:`Tracer`, loaded through
``sitecustomize``) that pickles the arguments of every call to a removed function. On the
host, hypothesis adds inputs mutated from the recorded values and from the parameters'
annotations (:mod:`.inputs`). The grading harness (:mod:`repogym.envs.grading.differential`)
then calls the reference on every input in that same container, twice, and each outcome that
is the same both times, quick, and not ``NotImplementedError`` is kept with its input in
``task.reference["cases"]``. None of it reaches the agent: the task's reference stays on the
host, and at grading only the inputs enter the grading container.
The tracer itself is :mod:`.tracer`; the removed functions, :mod:`.targets`.
"""

from __future__ import annotations

import json
import random
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from repogym.envs.grading.agreement import call_cases
from repogym.envs.grading.grader import Grader
from repogym.envs.grading.testcmd import failing_ids, runs_pytest
from repogym.errors import RepogymError, TaskError
from repogym.images.repository import ensure_image
from repogym.sandbox.base import SandboxConfig
from repogym.sandbox.docker import DockerSandbox
from repogym.schema import Task

from .inputs import generate_calls
from .targets import TargetFunction, target_functions
from .tracer import own_source, traced_run

TRACE_DIR = "/opt/repogym-grade/trace"
OUT_DIR = "/opt/repogym-grade/out"
SITECUSTOMIZE = (
    "import os\n"
    "if os.environ.get('REPOGYM_TRACE'):\n"
    "    import repogym_trace\n"
    "    repogym_trace.start(os.environ['REPOGYM_TRACE'])\n"
)


@dataclass(frozen=True)
class TraceConfig:
    """How many cases to record per function, and which to keep."""

    max_traced: int = 30  # recorded inputs kept per function (a seeded sample)
    max_generated: int = 30  # inputs hypothesis adds per function
    max_calls: int = 300  # distinct calls the tracer keeps per function
    max_bytes: int = 16_384  # a call's pickled arguments at most
    call_timeout: float = 2.0  # seconds per call at grading
    slow_call: float = 0.2  # reference calls slower than this are dropped
    max_raising: float = 0.25  # share of generated cases that may raise, at most
    seed: int = 0

    def __post_init__(self) -> None:
        if self.max_traced < 0 or self.max_generated < 0 or self.max_traced + \
                self.max_generated == 0:
            raise ValueError(f"max_traced={self.max_traced}, max_generated="
                             f"{self.max_generated}: give non-negative counts, not both 0.")
        if not 0 < self.slow_call < self.call_timeout:
            raise ValueError(f"slow_call={self.slow_call}: give 0 < slow_call < call_timeout "
                             f"({self.call_timeout}).")
        if not 0 <= self.max_raising <= 1:
            raise ValueError(f"max_raising={self.max_raising}: give a share in [0, 1].")


def record_cases(task: Task, config: TraceConfig | None = None, box: Any = None
                 ) -> tuple[Task | None, str]:
    """The task with ``reference["cases"]`` recorded in Docker (see the module docstring),
    or the task unchanged and why no case could be recorded. (A task whose image holds the
    removed code elsewhere never gets here: see :mod:`.leak`.) ``box``: a container that
    holds the task's base code already (task creation's, of the snapshot's image)."""
    ref = task.reference or {}
    if task.kind != "replication" or not ref.get("file") or "granularity" not in ref:
        return task, "not a replication task with a reference"
    if not runs_pytest(task.environment):
        return task, "calls are traced only under pytest"
    if box is not None:
        return _Recording(box, task, config or TraceConfig()).run()
    image = ensure_image(task, progress=lambda _m: None)
    box_config = SandboxConfig(image=image.tag, role="tracer", **Grader().container_config())
    with DockerSandbox(box_config) as new:
        return _Recording(new, task, config or TraceConfig()).run()


def recorder(config: TraceConfig | None = None
             ) -> Callable[[Task], tuple[Task | None, str]]:
    """:func:`record_cases` for a task source: a failure leaves the task without cases (its
    rewards then fall back to the tests) and says why."""
    def record(task: Task) -> tuple[Task | None, str]:
        try:
            return record_cases(task, config)
        except RepogymError as exc:
            return task, f"no cases recorded: {str(exc).splitlines()[0][:200]}"

    return record


class _Recording:
    """One task's recording in one container of its image."""

    def __init__(self, box: Any, task: Task, config: TraceConfig) -> None:
        self.box, self.task, self.config = box, task, config
        self.ref: dict[str, Any] = dict(task.reference or {})

    def root(self, script: str, timeout: float = 120) -> str:
        return str(self.box.exec(["bash", "-c", script], user="root", timeout=timeout,
                                 limit=64 * 1024 * 1024).output)

    def run(self) -> tuple[Task | None, str]:
        self.box.put_files({"repogym-grade/gold.patch": self.task.patch.encode()}, "/opt")
        text = self.root("cd /testbed && git apply --binary --whitespace=nowarn "
                         "/opt/repogym-grade/gold.patch >/dev/null 2>&1 && echo APPLIED && "
                         f"cat -- {shlex.quote(self.ref['file'])}")
        if not text.startswith("APPLIED\n"):
            raise TaskError(f"{self.task.instance_id}: the gold patch does not apply "
                            f"({text[-300:]}); run `repogym tasks validate` on it.")
        targets = target_functions(text.split("\n", 1)[1], self.ref)
        if not targets:
            return self.task, "no removed function to record"
        traced = self.trace(targets)
        candidates = self.candidates(targets, traced)
        cases = self.keep(targets, candidates)
        functions = {t.key: t.harness_entry() for t in targets
                     if any(c["fn"] == t.key for c in cases)}
        if not cases:
            return self.task, "no case recorded (no test calls a removed function with " \
                "arguments that can be pickled)"
        recorded = {"version": 1, "functions": functions, "cases": cases,
                    "call_timeout": self.config.call_timeout}
        counts = {o: sum(c["origin"] == o for c in cases) for o in ("trace", "hypothesis")}
        note = (f"{len(cases)} cases over {len(functions)} of {len(targets)} functions "
                f"({counts['trace']} traced, {counts['hypothesis']} generated)")
        return self.task.with_(reference={**self.ref, "cases": recorded}), note

    def trace(self, targets: list[TargetFunction]) -> dict[str, list[dict[str, Any]]]:
        """Runs the tests the removal breaks with the tracer on; the calls it saw, by key."""
        c = self.config
        spec = {"targets": [{"key": t.key, "path": f"/testbed/{self.ref['file']}",
                             "name": t.name, "lines": list(t.lines)} for t in targets],
                "out": OUT_DIR, "max_calls": c.max_calls, "max_bytes": c.max_bytes}
        files = sorted({t.split("::")[0] for t in self.task.FAIL_TO_PASS})
        dumps = traced_run(self.box, self.task.environment.test_cmd, files,
                           self.task.environment.timeout, {"repogym_trace.py": own_source()},
                           SITECUSTOMIZE, spec, TRACE_DIR, OUT_DIR, "trace-*.json",
                           ids=[failing_ids(self.task)])
        calls: dict[str, dict[str, dict[str, Any]]] = {t.key: {} for t in targets}
        for data in dumps:
            for key, found in data["calls"].items():
                for call in found:
                    calls.setdefault(key, {}).setdefault(json.dumps(call, sort_keys=True), call)
        return {key: list(found.values()) for key, found in calls.items()}

    def candidates(self, targets: list[TargetFunction],
                   traced: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
        """A seeded sample of the traced calls and twice the generated ones needed (the
        reference's run below drops some)."""
        c = self.config
        rng = random.Random(c.seed)
        out: list[dict[str, Any]] = []
        for t in targets:
            calls = traced.get(t.key, [])
            sample = rng.sample(calls, min(len(calls), c.max_traced))
            made = generate_calls(calls, t, 2 * c.max_generated, c.seed)
            out += [{"fn": t.key, **call, "origin": "trace"} for call in sample]
            out += [{"fn": t.key, **call, "origin": "hypothesis"} for call in made]
        return out

    def keep(self, targets: list[TargetFunction], candidates: list[dict[str, Any]]
             ) -> list[dict[str, Any]]:
        """The candidates on which the reference is deterministic, quick and really does
        something, each with ``expect``: its outcome."""
        c = self.config
        functions = {t.key: t.harness_entry() for t in targets}
        # calls that take more CPU than slow_call are dropped anyway: no need to wait for
        # them long, but a busy machine's queue may hold a quick call a while
        limit = min(c.call_timeout, 5 * c.slow_call)
        timeout = 60 + limit * len(candidates)
        first, _ = call_cases(self.box, functions, candidates, limit, timeout)
        second, _ = call_cases(self.box, functions, candidates, limit, timeout)
        valid = []
        for i, case in enumerate(candidates):
            a, b = first.get(str(i)), second.get(str(i))
            if a is None or b is None or json.dumps(a[0]) != json.dumps(b[0]):
                continue  # not deterministic, or the harness never got to it
            outcome, seconds = a[0], max(a[1], b[1])
            if outcome[0] in ("return", "raise") and seconds <= c.slow_call and \
                    outcome != ["raise", "builtins.NotImplementedError"]:
                valid.append({**case, "expect": outcome})
        return select_cases(valid, c)


def select_cases(valid: list[dict[str, Any]], config: TraceConfig) -> list[dict[str, Any]]:
    """Every traced case, and per function up to ``max_generated`` generated ones: those with
    an outcome not seen yet first, at most a ``max_raising`` share of them raising."""
    kept = [case for case in valid if case["origin"] == "trace"]
    by_fn: dict[str, list[dict[str, Any]]] = {}
    for case in valid:
        if case["origin"] != "trace":
            by_fn.setdefault(case["fn"], []).append(case)
    for cases in by_fn.values():
        seen: set[str] = {json.dumps(c["expect"]) for c in kept if c["fn"] == cases[0]["fn"]}
        fresh = []
        for case in cases:
            key = json.dumps(case["expect"])
            fresh.append(key not in seen)
            seen.add(key)
        ordered = [c for _, c in sorted(zip(fresh, cases, strict=True),
                                        key=lambda p: not p[0])]
        raising = [c for c in ordered if c["expect"][0] == "raise"]
        allowed = {id(c) for c in raising[:int(config.max_raising * config.max_generated)]}
        chosen = [c for c in ordered if c["expect"][0] != "raise" or id(c) in allowed]
        kept += chosen[:config.max_generated]
    return kept
