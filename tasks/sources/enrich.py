"""Gold cases: differential testing against the gold patch, for any task with one.

A task's gold patch is a reference implementation too. In a container of the task's image with
the gold patch and the test patch in place, the task's failing tests run under a tracer
(:mod:`.boundary`) that pickles the arguments of the calls crossing from test code into the
package, and of every call to a function the gold patch changes or adds (:mod:`.gold_targets`).
Hypothesis adds inputs mutated from those (:mod:`.inputs`). Every input then runs, in that
same container, on the gold code twice and, once the gold patch is reverted, on the base code
twice (:mod:`repogym.envs.grading.differential`, as the unprivileged user). An input whose
four outcomes are settled is kept:

- **discriminating** when gold and base differ: a fix must change what happens on it;
- **regression** (a seeded sample) when they agree: a fix must not change it.

Cases are scored on the boundary functions (those the tests call) when any of them has a
discriminating input, so a fix made elsewhere than in the gold patch's functions still agrees;
otherwise on the patch's own functions. They are stored in ``task.extra["gold_cases"]``, the
gold outcomes (``expect``) with them; at grading only the inputs enter the grading container
(:mod:`repogym.envs.grading.agreement`). A task where nothing can be traced keeps working
without cases: its rewards fall back to the tests.
"""

from __future__ import annotations

import base64
import json
import random
import shlex
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from repogym.envs.grading.agreement import call_cases
from repogym.envs.grading.differential import same
from repogym.envs.grading.grader import Grader
from repogym.envs.grading.testcmd import failing_ids, plain_ids, runs_pytest
from repogym.errors import RepogymError, SandboxError, TaskError
from repogym.images.repository import ensure_image
from repogym.sandbox.base import SandboxConfig
from repogym.sandbox.docker import DockerSandbox
from repogym.schema import Task

from . import boundary
from .common import log_stderr
from .gold_targets import Traced, changed_functions, name_traced, patch_paths, places
from .inputs import generate_calls
from .tracer import own_source, traced_run

GOLD_CASES = "gold_cases"  # the key of ``task.extra`` that holds them
TRACE_DIR = "/opt/repogym-grade/gold-trace"
OUT_DIR = "/opt/repogym-grade/gold-out"
SITECUSTOMIZE = (
    "import os\n"
    "if os.environ.get('REPOGYM_TRACE'):\n"
    "    import repogym_boundary\n"
    "    repogym_boundary.start(os.environ['REPOGYM_TRACE'])\n"
)


@dataclass(frozen=True)
class EnrichConfig:
    """How many inputs to try and to keep."""

    max_traced_functions: int = 300  # functions the tracer keeps (the first seen)
    max_functions: int = 40  # functions inputs are tried for (see ``ranked``)
    max_calls: int = 200  # distinct calls the tracer keeps per function
    max_bytes: int = 16_384  # a call's pickled arguments at most
    max_traced: int = 20  # recorded inputs tried per function (a seeded sample)
    max_generated: int = 20  # inputs hypothesis adds per function ...
    max_generated_failing: int = 60  # ... and per function a FAIL_TO_PASS test calls
    max_candidates: int = 800  # inputs tried in all
    max_discriminating: int = 100  # discriminating cases kept in all ...
    max_per_function: int = 25  # ... and per function
    max_regression: int = 45  # agreeing cases kept
    # passing siblings of the failing tests (their class, their function's other cases) traced
    # with them, a seeded sample: where regression cases' calls come from besides theirs
    neighbours: int = 20
    # seconds the traced run may take: it then ends with what it saw (``boundary.py``); the
    # failing tests of a task traced in 2-3 s, one of more-itertools' in 125 s
    trace_budget: float = 20.0
    call_timeout: float = 2.0  # seconds per call at grading
    slow_call: float = 0.2  # gold calls slower than this are dropped
    seed: int = 0

    def __post_init__(self) -> None:
        counts = {k: getattr(self, k) for k in (
            "max_traced_functions", "max_functions", "max_calls", "max_candidates",
            "max_discriminating", "max_per_function")}
        bad = {k: v for k, v in counts.items() if v < 1}
        if bad or min(self.max_traced, self.max_generated, self.max_generated_failing,
                      self.max_regression, self.neighbours) < 0:
            raise ValueError(f"{bad or 'max_traced/max_generated/max_regression/neighbours'}: "
                             "give positive counts (max_traced, max_generated, max_regression, "
                             "neighbours >= 0).")
        if self.trace_budget < 0:
            raise ValueError(f"trace_budget={self.trace_budget}: give seconds >= 0 (0: none).")
        if not 0 < self.slow_call < self.call_timeout:
            raise ValueError(f"slow_call={self.slow_call}: give 0 < slow_call < call_timeout "
                             f"({self.call_timeout}).")


def _group(test_id: str) -> str:
    """What a test shares with its siblings: its class (``file::Class``), or, for a function,
    the function of its parametrized cases (``file::test_x``)."""
    parts = test_id.split("[", 1)[0].split("::")
    return "::".join(parts[:-1]) if len(parts) > 2 else "::".join(parts)


def gold_cases(task: Task) -> dict[str, Any] | None:
    """The task's stored gold cases, or None."""
    found = task.extra.get(GOLD_CASES)
    return found if isinstance(found, dict) and found.get("cases") else None


def why_not(task: Task) -> str | None:
    """Why gold cases cannot be recorded for ``task``, or None when they can be tried."""
    if (task.reference or {}).get("cases"):
        return "a replication task with its own cases"
    if not task.patch.strip():
        return "no gold patch"
    if not runs_pytest(task.environment):
        return "calls are traced only under pytest"
    if not patch_paths(task.patch):
        return "the gold patch changes no library Python file"
    if not any(t.split("::")[0].endswith(".py") for t in task.FAIL_TO_PASS):
        return "no FAIL_TO_PASS test names a Python file to run"
    return None


def record_gold_cases(task: Task, config: EnrichConfig | None = None, box: Any = None
                      ) -> tuple[Task, str]:
    """The task with ``extra["gold_cases"]`` recorded in Docker (see the module docstring),
    or the task unchanged (without stale cases) and why none could be recorded. ``box``: a
    container that holds the task's base code already (task creation's, of the snapshot's
    image)."""
    reason = why_not(task)
    bare = task.with_(extra={k: v for k, v in task.extra.items() if k != GOLD_CASES})
    if reason:
        return bare, reason
    if box is not None:
        return _GoldRecording(box, bare, config or EnrichConfig()).run()
    image = ensure_image(task, progress=lambda _m: None)
    box_config = SandboxConfig(image=image.tag, role="tracer", **Grader().container_config())
    with DockerSandbox(box_config) as new:
        return _GoldRecording(new, bare, config or EnrichConfig()).run()


def gold_recorder(config: EnrichConfig | None = None) -> Callable[[Task], tuple[Task, str]]:
    """:func:`record_gold_cases` for a task source: an infrastructure failure leaves the task
    without cases (its rewards then fall back to the tests) and says why."""
    def record(task: Task) -> tuple[Task, str]:
        try:
            return record_gold_cases(task, config)
        except RepogymError as exc:
            bare = task.with_(extra={k: v for k, v in task.extra.items() if k != GOLD_CASES})
            return bare, f"no gold cases: {str(exc).splitlines()[0][:200]}"

    return record


class WithGoldCases:
    """A task source whose kept tasks get gold cases: ``repogym tasks add`` records them as
    it makes each task (replication tasks with their own cases are left as they are)."""

    def __init__(self, source: Any, record: Callable[[Task], tuple[Task, str]] | None = None,
                 log: Callable[[str], None] | None = None) -> None:
        self.source, self.name = source, source.name
        self.record = record or gold_recorder()
        self.log = log or log_stderr
        self.seconds = 0.0  # spent recording, summed over the threads that check candidates
        self._lock = threading.Lock()

    def candidates(self) -> Any:
        return self.source.candidates()

    def __getattr__(self, name: str) -> Any:  # the wrapped source's other attributes
        return getattr(self.source, name)

    def check(self, task: Task) -> tuple[Task | None, str]:
        done, reason = self.source.check(task)
        if done is None or why_not(done):
            return done, reason
        start = time.monotonic()
        done, note = self.record(done)
        with self._lock:
            self.seconds += time.monotonic() - start
        self.log(f"{done.instance_id}: {note}")
        return done, reason


class _GoldRecording:
    """One task's recording in one container of its image."""

    def __init__(self, box: Any, task: Task, config: EnrichConfig) -> None:
        self.box, self.task, self.config = box, task, config
        self.cut_short = False  # the traced run ended at its time budget

    def root(self, script: str, timeout: float = 120) -> str:
        return str(self.box.exec(["bash", "-c", script], user="root", timeout=timeout,
                                 limit=64 * 1024 * 1024).output)

    def read(self, paths: list[str]) -> dict[str, str | None]:
        """The texts of repository files now (None for a missing one). Each file's line is
        marked with its number: what else the container prints (a shell's warning on the same
        stream) is not taken for a file."""
        if not paths:
            return {}
        script = "cd /testbed && i=0; for f in " + " ".join(shlex.quote(p) for p in paths) + \
            "; do printf 'REPOGYM-FILE %d ' $i; if [ -f \"$f\" ]; then base64 -w0 -- \"$f\"; " \
            "else printf -- -; fi; echo; i=$((i+1)); done"
        out = self.root(script)
        found: dict[int, str] = {}
        for line in out.split("\n"):
            if line.startswith("REPOGYM-FILE "):
                number, _, data = line[len("REPOGYM-FILE "):].partition(" ")
                found[int(number)] = data.strip()
        texts: dict[str, str | None] = {}
        for i, path in enumerate(paths):
            got = found.get(i)
            try:
                if got is None:
                    raise ValueError("no line for it")
                texts[path] = None if got in ("", "-") else \
                    base64.b64decode(got, validate=True).decode("utf-8", "replace")
            except ValueError as exc:
                raise SandboxError(f"{self.task.instance_id}: reading {path} in the container "
                                   f"gave no file's content ({exc}); its output: {out[-300:]!r}"
                                   ) from exc
        return texts

    def apply(self, name: str, patch: str, reverse: bool = False) -> None:
        if not patch.strip():
            return
        self.box.put_files({f"repogym-grade/{name}": patch.encode()}, "/opt")
        out = self.root("cd /testbed && git apply --binary --whitespace=nowarn "
                        f"{'-R ' if reverse else ''}/opt/repogym-grade/{name} 2>&1 && echo DONE")
        if not out.rstrip().endswith("DONE"):
            raise TaskError(f"{self.task.instance_id}: the {name} does not "
                            f"{'revert' if reverse else 'apply'} ({out[-300:]}); run "
                            "`repogym tasks validate` on the task.")

    def run(self) -> tuple[Task, str]:
        clock = _Clock()
        files = patch_paths(self.task.patch)
        before = self.read(files)
        self.apply("gold.patch", self.task.patch)
        self.apply("test.patch", self.task.test_patch)
        after = self.read(files)
        targets = places(after, changed_functions(self.task.patch, before, after))
        functions, calls = self.trace(targets)
        texts = self.read(sorted({info["path"] for info in functions.values()}))
        patch_keys = {(p.path, line, p.name) for p in targets for line in p.lines}
        traced = ranked(name_traced(functions, calls, texts), patch_keys, self.task,
                        self.config.max_functions)
        in_patch = {t.key for t in traced if t.place in patch_keys}
        clock.lap("trace")
        # round 1: the inputs the tests passed
        first = self.traced_candidates(traced)
        if not first:
            return self.task, "nothing traced: no test calls the package with arguments " \
                "that can be pickled"
        kept = self.settle(traced, first)
        clock.lap("traced")
        # round 2: inputs hypothesis makes from them, from the discriminating ones where any
        second = self.generated_candidates(traced, kept, self.config.max_candidates - len(first))
        clock.lap("generate")
        if second:
            self.apply("gold.patch", self.task.patch)
            kept += self.settle(traced, second)
        clock.lap("generated")
        recorded = select(kept, traced, in_patch, self.config)
        tried = len(first) + len(second)
        if recorded is None:
            return self.task, f"no discriminating input among {tried} tried " \
                f"({len(kept)} settled) over {len(traced)} functions"
        recorded["tried"] = tried
        if self.cut_short:
            recorded["trace_budget"] = self.config.trace_budget
        recorded["seconds"] = clock.laps
        note = summary(recorded)
        return self.task.with_(extra={**self.task.extra, GOLD_CASES: recorded}), note

    def settle(self, traced: list[Traced], candidates: list[dict[str, Any]]
               ) -> list[dict[str, Any]]:
        """:func:`classify` of ``candidates``, run on the gold code (in place when called)
        and, after reverting the gold patch, on the base code (in place on return)."""
        gold = self.outcomes(traced, candidates)
        # only inputs the gold code settled need the base code's outcomes
        index = [i for i in range(len(candidates)) if _settled(gold, str(i))]
        settled = [candidates[i] for i in index]
        gold = [{str(j): run[str(i)] for j, i in enumerate(index)} for run in gold]
        self.apply("gold.patch", self.task.patch, reverse=True)
        if not settled:
            return []
        # the base code runs twice only where it differs from the gold code: an input whose
        # second run differs is dropped (a flaky base could agree with the gold code later)
        (once,) = self.outcomes(traced, settled, runs=1)
        differs = [i for i in range(len(settled)) if not _same_outcome(gold[0], once, str(i))]
        (again,) = self.outcomes(traced, [settled[i] for i in differs], runs=1) \
            if differs else ({},)
        twice = dict(once)
        for j, i in enumerate(differs):
            if str(j) in again:
                twice[str(i)] = again[str(j)]
            else:  # the harness never got to it
                twice.pop(str(i), None)
        return classify(settled, gold, [once, twice], self.config.slow_call)

    def trace(self, targets: list[Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """Runs the failing tests with the tracer on (by id where pytest can); what it saw."""
        c = self.config
        spec = {"root": "/testbed", "out": OUT_DIR, "max_calls": c.max_calls,
                "max_bytes": c.max_bytes, "max_functions": c.max_traced_functions,
                "budget": c.trace_budget,
                "targets": [{"path": f"/testbed/{p.path}", "name": p.name,
                             "lines": list(p.lines)} for p in targets]}
        with open(str(boundary.__file__), "rb") as f:
            tracers = {"repogym_boundary.py": f.read(), "repogym_trace.py": own_source()}
        files = sorted({t.split("::")[0] for t in self.task.FAIL_TO_PASS})
        dumps = traced_run(self.box, self.task.environment.test_cmd, files,
                           self.task.environment.timeout, tracers, SITECUSTOMIZE, spec,
                           TRACE_DIR, OUT_DIR, "gold-*.json", ids=self.traced_ids())
        functions: dict[str, Any] = {}
        calls: dict[str, dict[str, Any]] = {}
        self.cut_short = any(data.get("stopped") for data in dumps)
        for data in dumps:
            for key, info in data["functions"].items():
                seen = functions.setdefault(key, {**info, "from_tests": 0, "tests": []})
                seen["from_tests"] += info["from_tests"]
                seen["tests"] += [t for t in info["tests"] if t not in seen["tests"]]
            for key, found in data["calls"].items():
                for call in found:
                    calls.setdefault(key, {}).setdefault(json.dumps(call, sort_keys=True), call)
        return functions, {k: list(v.values()) for k, v in calls.items()}

    def traced_ids(self) -> list[list[str]]:
        """What the tracer runs, by id, instead of the failing tests' files (on a file of
        hundreds of tests it took minutes): the FAIL_TO_PASS tests with a seeded sample of
        their siblings (``neighbours``: PASS_TO_PASS tests of the same class, or cases of the
        same parametrized function, which call the same code with other inputs), then the
        FAIL_TO_PASS tests alone (should pytest not find a sibling); none where pytest cannot
        be given the ids. Siblings, not any test of the file: a file's slowest tests took
        minutes under the tracer."""
        failing = failing_ids(self.task)
        groups = {_group(i) for i in failing}
        siblings = sorted(i for i in self.task.PASS_TO_PASS if _group(i) in groups)
        if not failing or not plain_ids(siblings) or not self.config.neighbours:
            return [failing] if failing else []
        sample = random.Random(self.config.seed).sample(
            siblings, min(len(siblings), self.config.neighbours))
        return [[*failing, *sorted(sample)], failing]

    def traced_candidates(self, traced: list[Traced]) -> list[dict[str, Any]]:
        """A seeded sample of each function's traced calls, half of ``max_candidates`` at
        most."""
        c = self.config
        rng = random.Random(c.seed)
        share = c.max_candidates // 2 // max(1, len(traced))
        out: list[dict[str, Any]] = []
        for t in traced:
            sample = rng.sample(t.calls, min(len(t.calls), c.max_traced, share))
            out += [{"fn": t.key, **call, "origin": "trace"} for call in sample]
        return out

    def generated_candidates(self, traced: list[Traced], kept: list[dict[str, Any]],
                             budget: int) -> list[dict[str, Any]]:
        """Inputs mutated from the traced ones: from the discriminating ones for the functions
        that have some, which get ``max_generated_failing`` (so do the functions a
        FAIL_TO_PASS test calls), else ``max_generated``; ``budget`` in all."""
        c = self.config
        telling: dict[str, list[dict[str, Any]]] = {}
        for case in kept:
            if case["set"] == "discriminating":
                telling.setdefault(case["fn"], []).append(
                    {"args": case["args"], "kwargs": case["kwargs"]})
        wants = {t.key: c.max_generated_failing if t.key in telling or
                 called_by_failing(t, self.task) else c.max_generated for t in traced}
        scale = min(1.0, budget / max(1, sum(wants.values())))
        out: list[dict[str, Any]] = []
        for t in traced:
            seeds = telling.get(t.key) or t.calls
            n = int(wants[t.key] * scale)
            if seeds and n > 0:
                made = generate_calls(seeds, t.target, n, c.seed)
                out += [{"fn": t.key, **call, "origin": "hypothesis"} for call in made]
        return out

    def outcomes(self, traced: list[Traced], candidates: list[dict[str, Any]], runs: int = 2
                 ) -> list[dict[str, tuple[Any, float]]]:
        """``runs`` runs of the harness on the code in place now, as the unprivileged user."""
        c = self.config
        functions = {t.key: {**t.target.harness_entry()} for t in traced}
        # calls that take more CPU than slow_call are dropped anyway: no need to wait for
        # them long, but a busy machine's queue may hold a quick call a while
        limit = min(c.call_timeout, 5 * c.slow_call)
        timeout = 60 + limit * len(candidates)
        return [call_cases(self.box, functions, candidates, limit, timeout)[0]
                for _ in range(runs)]


class _Clock:
    """Seconds per phase of a recording."""

    def __init__(self) -> None:
        self.last = time.monotonic()
        self.laps: dict[str, float] = {}

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.laps[name] = round(now - self.last, 1)
        self.last = now


def ranked(traced: list[Traced], patch_keys: set[tuple[str, int, str]], task: Task,
           limit: int) -> list[Traced]:
    """The ``limit`` functions inputs are tried for: those a FAIL_TO_PASS test calls first,
    then the patch's own, then the rest the tests call (the first seen)."""

    def rank(t: Traced) -> int:
        if called_by_failing(t, task):
            return 0
        return 1 if t.place in patch_keys else 2

    return sorted(traced, key=rank)[:limit]


def called_by_failing(t: Traced, task: Task) -> bool:
    """Whether a FAIL_TO_PASS test (by its function's name) called ``t`` directly."""
    failing = {test.split("::")[-1].split("[")[0] for test in task.FAIL_TO_PASS}
    return bool(t.from_tests and failing.intersection(t.tests))


def _same_outcome(a: dict[str, tuple[Any, float]], b: dict[str, tuple[Any, float]],
                  key: str) -> bool:
    return key in a and key in b and same(a[key][0], b[key][0])


def _settled(runs: list[dict[str, tuple[Any, float]]], key: str) -> bool:
    """The gold code returned or raised the same way in both runs."""
    a, b = (run.get(key) for run in runs)
    return a is not None and b is not None and a[0][0] in ("return", "raise") and \
        json.dumps(a[0]) == json.dumps(b[0])


def classify(candidates: list[dict[str, Any]], gold: list[dict[str, tuple[Any, float]]],
             base: list[dict[str, tuple[Any, float]]], slow_call: float
             ) -> list[dict[str, Any]]:
    """The candidates whose outcomes are settled: the gold code returned or raised the same
    both times, quickly, and the base code did the same both times. Each comes back with
    ``expect`` (the gold outcome) and ``set``: ``discriminating`` when gold and base differ,
    ``regression`` when they agree."""
    kept = []
    for i, case in enumerate(candidates):
        g = [run.get(str(i)) for run in gold]
        b = [run.get(str(i)) for run in base]
        if any(x is None for x in g + b):
            continue  # the harness never got to it
        g1, g2 = g[0][0], g[1][0]  # type: ignore[index]
        b1, b2 = b[0][0], b[1][0]  # type: ignore[index]
        if json.dumps(g1) != json.dumps(g2) or json.dumps(b1) != json.dumps(b2):
            continue  # not deterministic
        if g1[0] not in ("return", "raise") or max(g[0][1], g[1][1]) > slow_call:  # type: ignore[index]
            continue
        kept.append({**case, "expect": g1,
                     "set": "regression" if same(g1, b1) else "discriminating"})
    return kept


def _round_robin(by_fn: dict[str, list[dict[str, Any]]], total: int, per: int
                 ) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    queues = {fn: list(cases[:per]) for fn, cases in sorted(by_fn.items())}
    while len(out) < total and any(queues.values()):
        for fn in sorted(queues):
            if queues[fn] and len(out) < total:
                out.append(queues[fn].pop(0))
    return out


def select(kept: list[dict[str, Any]], traced: list[Traced], in_patch: set[str],
           config: EnrichConfig) -> dict[str, Any] | None:
    """The cases to store (see the module docstring), or None without a discriminating one."""
    boundary_fns = {t.key for t in traced if t.from_tests}
    scope, fns = "boundary", boundary_fns
    if not any(c["set"] == "discriminating" and c["fn"] in fns for c in kept):
        scope, fns = "patch", in_patch
    if not any(c["set"] == "discriminating" and c["fn"] in fns for c in kept):
        return None
    rng = random.Random(config.seed)

    def grouped(kind: str) -> dict[str, list[dict[str, Any]]]:
        by_fn: dict[str, list[dict[str, Any]]] = {}
        for case in kept:
            if case["set"] == kind and case["fn"] in fns:
                by_fn.setdefault(case["fn"], []).append(case)
        for cases in by_fn.values():  # traced inputs first, each group in a seeded order
            rng.shuffle(cases)
            cases.sort(key=lambda c: c["origin"] != "trace")
        return by_fn

    chosen = _round_robin(grouped("discriminating"), config.max_discriminating,
                          config.max_per_function)
    # regressions: two thirds of the sample on the functions the fix changes the behaviour of
    # (where a partial fix breaks what it should keep), the rest spread over the others
    agreeing, telling = grouped("regression"), {c["fn"] for c in chosen}
    first = _round_robin({f: c for f, c in agreeing.items() if f in telling},
                         config.max_regression * 2 // 3, config.max_regression)
    chosen += first + _round_robin({f: c for f, c in agreeing.items() if f not in telling},
                                   config.max_regression - len(first), config.max_regression)
    used = {c["fn"] for c in chosen}
    return {"version": 1, "scope": scope, "call_timeout": config.call_timeout,
            "functions": {t.key: t.target.harness_entry() for t in traced if t.key in used},
            "boundary": sorted(used & boundary_fns), "patch_functions": sorted(in_patch),
            "cases": [{k: c[k] for k in ("fn", "args", "kwargs", "origin", "set", "expect")}
                      for c in chosen]}


def summary(recorded: dict[str, Any]) -> str:
    cases = recorded["cases"]
    n = {s: sum(c["set"] == s for c in cases) for s in ("discriminating", "regression")}
    return (f"{n['discriminating']} discriminating and {n['regression']} regression cases "
            f"over {len(recorded['functions'])} {recorded['scope']} functions")
