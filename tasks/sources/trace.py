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

This file also runs inside the container as the tracer, so its top level imports only the
standard library (and runs on Python 3.9); the host's functions import what they need.
"""

from __future__ import annotations

import ast
import atexit
import base64
import hashlib
import inspect
import json
import os
import pickle
import random
import shlex
import sys
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    from repogym.tasks.schema import Task

TRACE_DIR = "/opt/repogym-grade/trace"
OUT_DIR = "/opt/repogym-grade/out"
SITECUSTOMIZE = (
    "import os\n"
    "if os.environ.get('REPOGYM_TRACE'):\n"
    "    import repogym_trace\n"
    "    repogym_trace.start(os.environ['REPOGYM_TRACE'])\n"
)
_RESUMABLE = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


# ---------------------------------------------------------------------------- the tracer


class Tracer:
    """Keeps the pickled arguments of calls to the targets (dicts with ``key``, ``path``,
    ``name`` and ``lines``, the lines a code object of theirs may start on)."""

    def __init__(self, targets: list[dict[str, Any]], max_calls: int, max_bytes: int) -> None:
        self.places = {(os.path.realpath(t["path"]), t["name"], line): t["key"]
                       for t in targets for line in t["lines"]}
        self.files = {place[0] for place in self.places}
        self.codes: dict[Any, str | None] = {}
        self.starts: dict[Any, int] = {}  # a generator's code: where its first entry stands
        self.calls: dict[str, dict[str, dict[str, Any]]] = {t["key"]: {} for t in targets}
        self.skipped = {t["key"]: 0 for t in targets}
        self.max_calls, self.max_bytes = max_calls, max_bytes

    def profile(self, frame: Any, event: str, arg: Any) -> None:
        if event != "call":
            return
        code = frame.f_code
        key = self.codes[code] if code in self.codes else self._match(code)
        if key is None or len(self.calls[key]) >= self.max_calls:
            return
        # a generator's frame reports a "call" each time it resumes; only its start counts
        if code.co_flags & _RESUMABLE and self.starts.setdefault(code, frame.f_lasti) \
                != frame.f_lasti:
            return
        self._record(key, frame)

    def _match(self, code: Any) -> str | None:
        path = os.path.realpath(code.co_filename) if code.co_filename else ""
        key = self.places.get((path, code.co_name, code.co_firstlineno)) \
            if path in self.files else None
        self.codes[code] = key
        return key

    def _record(self, key: str, frame: Any) -> None:
        try:
            args, kwargs = arguments(frame.f_code, frame.f_locals)
            blobs = [pickle.dumps(a, 4) for a in args]
            named = {k: pickle.dumps(v, 4) for k, v in sorted(kwargs.items())}
        except Exception:  # noqa: BLE001 - unpicklable arguments (lambdas, files) are skipped
            self.skipped[key] += 1
            return
        if sum(map(len, blobs)) + sum(map(len, named.values())) > self.max_bytes:
            self.skipped[key] += 1
            return
        digest = hashlib.sha1(repr((blobs, named)).encode()).hexdigest()
        self.calls[key].setdefault(digest, {
            "args": [base64.b64encode(b).decode() for b in blobs],
            "kwargs": {k: base64.b64encode(v).decode() for k, v in named.items()}})

    def dump(self, out_dir: str) -> None:
        sys.setprofile(None)
        data = {"calls": {k: list(v.values()) for k, v in self.calls.items()},
                "skipped": self.skipped}
        with open(os.path.join(out_dir, f"trace-{os.getpid()}.json"), "w") as f:
            json.dump(data, f)


def arguments(code: Any, local: Any) -> tuple[list[Any], dict[str, Any]]:
    """The positional and keyword arguments that rebuild a call from its frame's locals."""
    names = code.co_varnames
    n, k = code.co_argcount, code.co_kwonlyargcount
    args = [local[name] for name in names[:n]]
    kwargs = {name: local[name] for name in names[n:n + k]}
    i = n + k
    if code.co_flags & inspect.CO_VARARGS:
        args += list(local[names[i]])
        i += 1
    if code.co_flags & inspect.CO_VARKEYWORDS:
        kwargs.update(local[names[i]])
    return args, kwargs


def start(config_path: str) -> Tracer:
    """Traces this process (and its threads) until it exits, then writes what it saw."""
    with open(config_path) as f:
        config = json.load(f)
    tracer = Tracer(config["targets"], config["max_calls"], config["max_bytes"])
    atexit.register(tracer.dump, config["out"])
    threading.setprofile(tracer.profile)
    sys.setprofile(tracer.profile)
    return tracer


# ---------------------------------------------------------------------------- the targets


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


@dataclass(frozen=True)
class TargetFunction:
    """One removed function as the tracer finds it and the harness calls it."""

    key: str  # the qualname, with "#N" for a later definition of the same name
    module: str
    qualname: str
    role: str  # "call", or the property accessor: "fget", "fset", "fdel"
    lines: tuple[int, ...]  # where its code object may start: the def, the first decorator
    params: tuple[str, ...] = ()  # positional parameters in order
    vararg: str | None = None
    required: int = 0  # positional parameters without a default
    annotations: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.qualname.rsplit(".", 1)[-1]

    def harness_entry(self) -> dict[str, str]:
        return {"module": self.module, "qualname": self.qualname, "role": self.role}


def target_functions(text: str, reference: dict[str, Any]) -> list[TargetFunction]:
    """The functions a replication task removed, from the reference's module text."""
    from repogym.tasks.sources import pyast

    module = pyast.parse(text)
    defs = [d for d in pyast.definitions(module) if not d.is_class]
    if reference["granularity"] != "module":
        node = pyast.find(module, reference["qualname"], reference.get("occurrence", 0))
        inside = {id(fn) for fn in pyast.functions_in(node)}
        defs = [d for d in defs if id(d.node) in inside]
    name = pyast.module_name(reference["file"])
    return [_target(name, d.qualname, d.occurrence, d.node) for d in defs  # type: ignore[arg-type]
            if not pyast.is_trivial(d.node)]  # type: ignore[arg-type]


def _target(module: str, qualname: str, occurrence: int,
            node: ast.FunctionDef | ast.AsyncFunctionDef) -> TargetFunction:
    decorators = [ast.unparse(d) for d in node.decorator_list]
    role = "call"
    if "property" in decorators:
        role = "fget"
    elif any(d.endswith((".setter", ".deleter")) for d in decorators):
        role = "fset" if any(d.endswith(".setter") for d in decorators) else "fdel"
    lines = {node.lineno} | {min(d.lineno for d in node.decorator_list)} \
        if node.decorator_list else {node.lineno}
    a = node.args
    positional = [*a.posonlyargs, *a.args]
    every = [*positional, *a.kwonlyargs] + [x for x in (a.vararg, a.kwarg) if x]
    return TargetFunction(
        key=qualname + (f"#{occurrence}" if occurrence else ""), module=module,
        qualname=qualname, role=role, lines=tuple(sorted(lines)),
        params=tuple(x.arg for x in positional), vararg=a.vararg.arg if a.vararg else None,
        required=len(positional) - len(a.defaults),
        annotations={x.arg: ast.unparse(x.annotation) for x in every if x.annotation})


# ---------------------------------------------------------------------------- the recording


def record_cases(task: Task, config: TraceConfig | None = None, box: Any = None
                 ) -> tuple[Task | None, str]:
    """The task with ``reference["cases"]`` recorded in Docker (see the module docstring),
    or the task unchanged and why no case could be recorded. (A task whose image holds the
    removed code elsewhere never gets here: see :mod:`.leak`.) ``box``: a container that
    holds the task's base code already (task creation's, of the snapshot's image)."""
    from repogym.envs.grading.grader import Grader
    from repogym.envs.grading.testcmd import runs_pytest
    from repogym.envs.sandbox.base import SandboxConfig
    from repogym.envs.sandbox.docker import DockerSandbox
    from repogym.tasks.images import ensure_image

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
    from repogym.errors import RepogymError

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
        from repogym.errors import TaskError

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
        sub = TRACE_DIR.removeprefix("/opt/")
        with open(__file__, "rb") as f:
            own = f.read()
        self.box.put_files({f"{sub}/repogym_trace.py": own,
                            f"{sub}/sitecustomize.py": SITECUSTOMIZE.encode(),
                            f"{sub}/config.json": json.dumps(spec).encode()}, "/opt")
        self.root(f"mkdir -p {OUT_DIR} && chown 1000:1000 {OUT_DIR}")
        files = sorted({t.split("::")[0] for t in self.task.FAIL_TO_PASS})
        command = (f"{self.task.environment.test_cmd} -p no:cacheprovider -o addopts= "
                   + " ".join(shlex.quote(f) for f in files if f.endswith(".py")))
        self.box.exec(["env", f"PYTHONPATH={TRACE_DIR}", f"REPOGYM_TRACE={TRACE_DIR}/config.json",
                       "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1", "PYTHONDONTWRITEBYTECODE=1",
                       "PYTHONHASHSEED=0",
                       "bash", "-c", command], timeout=self.task.environment.timeout)
        dumps = self.root(f"for f in {OUT_DIR}/trace-*.json; do [ -e \"$f\" ] && "
                          "base64 -w0 \"$f\"; echo; done")
        calls: dict[str, dict[str, dict[str, Any]]] = {t.key: {} for t in targets}
        for line in dumps.split():
            for key, found in json.loads(base64.b64decode(line))["calls"].items():
                for call in found:
                    calls.setdefault(key, {}).setdefault(json.dumps(call, sort_keys=True), call)
        return {key: list(found.values()) for key, found in calls.items()}

    def candidates(self, targets: list[TargetFunction],
                   traced: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
        """A seeded sample of the traced calls and twice the generated ones needed (the
        reference's run below drops some)."""
        from .inputs import generate_calls

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
        from repogym.envs.grading.agreement import call_cases

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
