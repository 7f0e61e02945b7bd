"""Recording the cases of differential testing when a replication task is made.

In a container of the task's image with the reference (the gold patch) in place, the tests
that the removal breaks run under a small profiler (:class:`Tracer`, loaded through
``sitecustomize``) that pickles the arguments of every call to a removed function. On the
host, hypothesis adds inputs mutated from the recorded values and from the parameters'
annotations. The grading harness (:mod:`repogym.envs.grading.differential`) then calls the
reference on every input in that same container, twice, and each outcome that is the same
both times, quick, and not ``NotImplementedError`` is kept with its input in
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
import io
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

    module = ast.parse(text)
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


# ---------------------------------------------------------------------------- generated inputs


class _PlainUnpickler(pickle.Unpickler):
    """Loads only plain data (numbers, strings, bytes, containers): anything else (the
    project's objects) stays an opaque recorded value."""

    SAFE = frozenset({"set", "frozenset", "complex", "bytearray", "range"})

    def find_class(self, module: str, name: str) -> Any:
        if module == "builtins" and name in self.SAFE:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not plain data")


def plain_value(blob: str) -> tuple[bool, Any]:
    """(True, value) when a recorded argument is plain data, else (False, None)."""
    try:
        return True, _PlainUnpickler(io.BytesIO(base64.b64decode(blob))).load()
    except Exception:  # noqa: BLE001 - not plain: kept as recorded
        return False, None


def _dump(value: Any) -> str:
    return base64.b64encode(pickle.dumps(value, 4)).decode()


def value_strategy(st: Any, value: Any, depth: int = 0) -> Any:
    """Values near ``value``: itself, small changes of it, others of its type and shape."""
    t = type(value)
    if value is None or depth > 3:
        return st.just(value)
    if t is bool:
        return st.booleans()
    if t is int:
        return st.one_of(st.just(value), st.integers(value - 3, value + 3),
                         st.integers(min(value, 0) - 8, max(value, 0) * 2 + 8))
    if t is range:
        return st.builds(range, value_strategy(st, value.start, depth + 1),
                         value_strategy(st, value.stop, depth + 1), st.just(value.step))
    if t is float:
        bound = abs(value) * 2 + 10 if value == value and abs(value) < 1e300 else 1e6
        return st.one_of(st.just(value), st.sampled_from([0.0, -0.0, 1.0, -1.5]),
                         st.floats(-bound, bound, allow_nan=False, allow_infinity=False))
    if t is str:
        alphabet = sorted(set(value) | set("aZ_- 1"))
        variants = [value.upper(), value.lower(), value.title(), value.swapcase(), value[::-1],
                    value[1:], value + value[:1]]
        return st.one_of(st.just(value), st.sampled_from(variants),
                         st.text(st.sampled_from(alphabet), max_size=len(value) + 4))
    if t is bytes:
        return st.one_of(st.just(value), st.binary(max_size=len(value) + 4))
    return _container_strategy(st, value, t, depth)


def _container_strategy(st: Any, value: Any, t: type, depth: int) -> Any:
    items = list(value.items()) if t is dict else list(value) if t in (list, tuple, set,
                                                                       frozenset) else []
    if not items:  # nothing to mutate: small ints, the commonest element in tests
        some = _collections(st).get(t)
        return st.one_of(st.just(value), some(st.integers(-5, 20), max_size=6)) \
            if some else st.just(value)
    if t is tuple:
        return st.tuples(*(value_strategy(st, v, depth + 1) for v in value)) \
            if len(value) <= 6 else st.just(value)
    if t is dict:
        keys = st.one_of(*(value_strategy(st, k, depth + 1) for k, _ in items[:6]))
        values = st.one_of(*(value_strategy(st, v, depth + 1) for _, v in items[:6]))
        return st.dictionaries(keys, values, max_size=len(items) + 2)
    elements = st.one_of(*(value_strategy(st, v, depth + 1) for v in items[:6]))
    return _collections(st)[t](elements, max_size=len(items) + 3)


def _collections(st: Any) -> dict[type, Any]:
    return {list: st.lists, set: st.sets, frozenset: st.frozensets}


def annotation_strategy(st: Any, text: str) -> Any | None:
    """Values of a simple annotation (``int``, ``str | None``, ``list[float]``, ...), or None."""
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return None
    return _annotation(st, node)


def _annotation(st: Any, node: ast.expr) -> Any | None:
    simple = {"int": st.integers(-100, 100), "bool": st.booleans(), "str": st.text(max_size=12),
              "bytes": st.binary(max_size=12), "None": st.none(),
              "float": st.floats(-1e3, 1e3, allow_nan=False)}
    if isinstance(node, ast.Constant) and node.value is None:
        return st.none()
    name = ast.unparse(node.value if isinstance(node, ast.Subscript) else node).split(".")[-1]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        parts = [_annotation(st, node.left), _annotation(st, node.right)]
        return st.one_of(*parts) if all(p is not None for p in parts) else None
    if not isinstance(node, ast.Subscript):
        return simple.get(name)
    inner = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    args = [None if isinstance(x, ast.Constant) and x.value is Ellipsis else _annotation(st, x)
            for x in inner]
    if name == "Optional" and args[0] is not None:
        return st.one_of(st.none(), args[0])
    if name == "Union" and all(a is not None for a in args):
        return st.one_of(*args)
    if name.lower() in ("list", "sequence", "iterable") and args[0] is not None:
        return st.lists(args[0], max_size=5)
    if name.lower() in ("set", "frozenset") and args[0] is not None:
        return st.sets(args[0], max_size=5)
    if name.lower() in ("dict", "mapping") and len(args) == 2 and None not in args:
        return st.dictionaries(args[0], args[1], max_size=4)
    if name.lower() == "tuple" and args and args[-1] is None and args[0] is not None:
        return st.lists(args[0], max_size=4).map(tuple)
    if name.lower() == "tuple" and args and None not in args:
        return st.tuples(*args)
    return None


def _slot(st: Any, blob: str, annotation: str | None) -> Any:
    ok, value = plain_value(blob)
    if not ok:
        return st.just(blob)
    strategy = value_strategy(st, value)
    typed = annotation_strategy(st, annotation) if annotation else None
    return (st.one_of(strategy, typed) if typed is not None else strategy).map(_dump)


def _call_strategy(st: Any, call: dict[str, Any], target: TargetFunction) -> Any:
    def annotation(i: int) -> str | None:
        name = target.params[i] if i < len(target.params) else target.vararg
        return target.annotations.get(name) if name else None

    args = st.tuples(*(_slot(st, b, annotation(i)) for i, b in enumerate(call["args"])))
    kwargs = st.fixed_dictionaries({k: _slot(st, b, target.annotations.get(k))
                                    for k, b in call["kwargs"].items()})
    return st.builds(lambda a, k: {"args": list(a), "kwargs": k}, args, kwargs)


def _typed_strategy(st: Any, target: TargetFunction) -> Any | None:
    """Calls made from the annotations alone, for a function no test called directly."""
    names = target.params[:target.required]
    if names[:1] in (("self",), ("cls",)):
        return None
    typed = [annotation_strategy(st, target.annotations.get(n, "")) for n in names]
    if not typed or any(s is None for s in typed):
        return None
    return st.tuples(*(s.map(_dump) for s in typed if s is not None)).map(
        lambda a: {"args": list(a), "kwargs": {}})


def generate_calls(calls: list[dict[str, Any]], target: TargetFunction, n: int, seed: int
                   ) -> list[dict[str, Any]]:
    """Up to ``n`` new calls, mutated from the recorded ones (or made from the annotations),
    with hypothesis, deterministically for ``seed``. Empty when hypothesis is missing."""
    try:
        from hypothesis import HealthCheck, Phase, given, settings
        from hypothesis import seed as fix_seed
        from hypothesis import strategies as st
    except ImportError:
        return []
    strategy: Any = (st.sampled_from(calls).flatmap(lambda c: _call_strategy(st, c, target))
                     if calls else _typed_strategy(st, target))
    if n <= 0 or strategy is None:
        return []
    found: dict[str, dict[str, Any]] = {}

    @fix_seed(seed)
    @settings(max_examples=4 * n, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(call: dict[str, Any]) -> None:
        found.setdefault(json.dumps(call, sort_keys=True), call)

    collect()
    seen = {json.dumps(c, sort_keys=True) for c in calls}
    return [c for key, c in found.items() if key not in seen][:n]


# ---------------------------------------------------------------------------- the recording


def record_cases(task: Task, config: TraceConfig | None = None) -> tuple[Task | None, str]:
    """The task with ``reference["cases"]`` recorded in Docker (see the module docstring),
    or the task unchanged and why no case could be recorded, or None when the image already
    holds the removed code elsewhere (a vendored copy the agent could import)."""
    from repogym.envs.grading.grader import PYTEST_PARSERS, Grader
    from repogym.envs.sandbox.base import SandboxConfig
    from repogym.envs.sandbox.docker import DockerSandbox
    from repogym.tasks.images import ensure_image

    ref = task.reference or {}
    if task.kind != "replication" or not ref.get("file") or "granularity" not in ref:
        return task, "not a replication task with a reference"
    if task.environment.log_parser not in PYTEST_PARSERS:
        return task, "calls are traced only under pytest"
    image = ensure_image(task, progress=lambda _m: None)
    box_config = SandboxConfig(image=image.tag, role="tracer", **Grader().container_config())
    with DockerSandbox(box_config) as box:
        return _Recording(box, task, config or TraceConfig()).run()


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

        copies = self.copies()
        if copies:
            return None, f"the image already holds the removed code, in {copies[:3]}"
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

    def copies(self) -> list[str]:
        """Files of the image, before the reference is put back, that hold its most telling
        lines: another copy (say, vendored by some package) the agent could simply import."""
        lines = telling_lines(self.ref.get("source", ""))
        if not lines:
            return []
        command = ("grep -rlIFsZ --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev -e "
                   f"{shlex.quote(lines[0])} / | xargs -0 -r grep -lFs -e "
                   f"{shlex.quote(lines[-1])}")
        return self.root(command, timeout=600).split()

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
        # calls slower than slow_call are dropped anyway: no need to wait for them longer
        limit = min(c.call_timeout, 2 * c.slow_call)
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


def telling_lines(source: str, count: int = 2) -> list[str]:
    """The longest lines of code (not docstrings, not signatures) of removed definitions."""
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return []
    text = textwrap.dedent(source).splitlines()
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body[1:] if ast.get_docstring(node) is not None else node.body
            for stmt in body:
                if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    continue
                end = stmt.end_lineno or stmt.lineno
                found.update(line.strip() for line in text[stmt.lineno - 1:end])
    ranked = sorted((x for x in found if len(x) >= 16 and not x.startswith("#")),
                    key=lambda x: (-len(x), x))
    return ranked[:count]


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
