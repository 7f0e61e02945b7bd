"""Differential testing: a replication candidate against the reference it replaces.

A replication task made with recorded cases (see :mod:`repogym.tasks.sources.trace`) holds, in
``task.reference["cases"]``, inputs for each removed function and the canonical encoding of
what the reference did on each. After the test run, the grader copies this file and the
inputs (never the expected outcomes) into the grading container and runs it there as the
unprivileged user: it imports the candidate, calls every function on every input and prints
one canonical encoding per call. The host compares them with the reference's, so nothing in
the container can fake agreement without computing the right answers.

This file is the harness (``python differential.py INPUTS.json`` in a container) and the
equality the host scores with (:func:`same`); :mod:`repogym.envs.grading.agreement` runs it and
scores. It imports only the standard library and runs on Python 3.9.

**How equality is decided.** An outcome is the returned value, plus the state after the call
of every mutable argument (lists, dicts, sets, objects, ``self``), or the type of the raised
exception (type only, never the message), or a timeout (never equal). Values are encoded, and
only the encodings are compared; no ``__eq__`` of the candidate's is ever called:

- ``None``, bools, ints and strings exactly (a bool is not an int); floats, and ints against
  floats, with ``math.isclose(rel_tol=1e-9, abs_tol=1e-12)``, NaN equal to NaN.
- lists, tuples and other sequences in order, and their type (a tuple is not a list).
- sets and frozensets order-free and exactly (elements are sorted by their encoding); dicts
  order-free on their keys (exactly), their values as above.
- a returned iterator or generator by the items it yields (at most ``MAX_ITEMS``), then the
  exception it raises, if any.
- objects by type (``module.qualname``) and the canonical encoding of their ``vars()`` and
  slots, recursively: their own ``__eq__`` is ignored. Known value types (decimals,
  fractions, dates, paths, UUIDs, enums) by type and text. Depth is capped at ``MAX_DEPTH``
  and a cycle encodes as a marker; strings longer than ``MAX_STR`` by length and SHA-256.

**Limits.** Each call runs in a forked child, killed after the task's ``call_timeout``
(2 s unless the task says otherwise): a call that hangs, even one that swallows every
exception, crashes or exits is a disagreement, and no call sees what an earlier one left
behind. Importing the candidate gets 10 s (an alarm), the whole run 30 s; cases without an
outcome by then disagree. Each result line carries the CPU seconds its child took (the import
and the wait for a busy machine's cores left out), which is what recording calls slow.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import enum
import fractions
import functools
import hashlib
import importlib
import inspect
import json
import math
import os
import pathlib
import pickle
import re
import select
import signal
import sys
import time
import uuid
from typing import Any

MAX_DEPTH = 12
MAX_ITEMS = 1000
MAX_STR = 4000
REL_TOL, ABS_TOL = 1e-9, 1e-12
MARK = "\x1eRGD\t"  # starts every result line the harness prints
DIR = "/opt/repogym-grade/diff"  # where the harness and its inputs go in the container
OUTPUT_LIMIT = 64 * 1024 * 1024
_VALUE_TYPES = (decimal.Decimal, fractions.Fraction, datetime.date, datetime.time,
                datetime.timedelta, uuid.UUID, pathlib.PurePath)
_IMMUTABLE = (str, bytes, int, float, complex, bool, type(None), range, frozenset)


# ---------------------------------------------------------------------------- encoding


def type_name(t: type) -> str:
    return f"{getattr(t, '__module__', '?')}.{getattr(t, '__qualname__', t.__name__)}"


def encode(value: object, depth: int = 0, stack: set[int] | None = None) -> Any:
    """The canonical, JSON-ready encoding of ``value`` (see the module docstring)."""
    t = type(value)
    if value is None or t in (bool, int, float):
        return value
    if t is str:
        return value if len(value) <= MAX_STR else _long_str(value)  # type: ignore[arg-type]
    if depth > MAX_DEPTH:
        return ["deep"]
    stack = set() if stack is None else stack
    if id(value) in stack:
        return ["cycle"]
    stack.add(id(value))
    try:
        return _encode_other(value, t, depth + 1, stack)
    finally:
        stack.discard(id(value))


def _long_str(text: str) -> list[Any]:
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return ["strh", len(text), digest]


def _encode_other(value: Any, t: type, depth: int, stack: set[int]) -> Any:
    def enc(v: object) -> Any:
        return encode(v, depth, stack)

    name = None if t.__module__ == "builtins" else type_name(t)
    if isinstance(value, enum.Enum):
        return ["enum", type_name(t), value.name]
    if isinstance(value, (bool, int, float, str)):
        base = next(b for b in (bool, int, float, str) if isinstance(value, b))
        return ["sub", name, enc(base(value))]
    if isinstance(value, (bytes, bytearray)):
        return ["bytes", name, base64.b64encode(bytes(value)).decode()]
    if t is complex:
        return ["complex", value.real, value.imag]
    if isinstance(value, (list, tuple)) or type_name(t) == "collections.deque":
        tag = "tuple" if isinstance(value, tuple) else "list"
        return [tag, name, *(enc(v) for v in _head(value))]
    if isinstance(value, (set, frozenset)) or t.__name__ in ("dict_keys", "dict_items"):
        return ["set", name, *sorted((enc(v) for v in _head(value)), key=_key)]
    if isinstance(value, dict):
        pairs = [[enc(k), enc(v)] for k, v in _head(value.items())]
        return ["dict", name, *sorted(pairs, key=lambda p: _key(p[0]))]
    if t.__name__ == "dict_values":
        return ["bag", *sorted((enc(v) for v in _head(value)), key=_key)]
    if t is range or t is slice:
        return [t.__name__, enc(value.start), enc(value.stop), enc(value.step)]
    return _encode_object(value, t, enc)


def _encode_object(value: Any, t: type, enc: Any) -> Any:
    if isinstance(value, _VALUE_TYPES):
        return ["value", type_name(t), str(value)]
    if isinstance(value, re.Pattern):
        return ["value", "re.Pattern", enc(value.pattern), value.flags]
    if isinstance(value, type):
        return ["type", type_name(value)]
    if inspect.ismodule(value):
        return ["module", value.__name__]
    if inspect.isroutine(value):
        return ["callable", f"{getattr(value, '__module__', '?')}.{value.__qualname__}"]
    if isinstance(value, BaseException):
        return ["exception", type_name(t), *(enc(a) for a in value.args)]
    if hasattr(t, "__next__") and hasattr(t, "__iter__"):
        return ["iter", *_drain(value, enc)]
    state = _state(value)
    if state is not None:
        return ["obj", type_name(t), enc(state)]
    try:
        reduced = value.__reduce_ex__(4)
    except Exception:  # noqa: BLE001 - an object that cannot say what it holds
        reduced = None
    if isinstance(reduced, tuple) and len(reduced) > 1:
        return ["obj", type_name(t), enc(list(reduced[1:3]))]
    return ["opaque", type_name(t)]


def _state(value: Any) -> dict[str, Any] | None:
    """``vars()`` plus every slot that is set, or None for objects with neither."""
    state = dict(getattr(value, "__dict__", None) or {})
    has_slots = False
    for klass in type(value).__mro__:
        slots = klass.__dict__.get("__slots__", ())
        for slot in (slots,) if isinstance(slots, str) else slots:
            has_slots = True
            if slot not in ("__dict__", "__weakref__") and hasattr(value, slot):
                state[slot] = getattr(value, slot)
    if not state and not has_slots and not hasattr(value, "__dict__"):
        return None
    return state


def _head(items: Any) -> list[Any]:
    out = []
    for i, item in enumerate(items):
        if i >= MAX_ITEMS:
            out.append(["more"])
            break
        out.append(item)
    return out


def _drain(iterator: Any, enc: Any) -> list[Any]:
    """What an iterator yields, then the exception that ended it (if not StopIteration)."""
    out: list[Any] = []
    try:
        for i, item in enumerate(iterator):
            if i >= MAX_ITEMS:
                out.append(["more"])
                break
            out.append(enc(item))
    except BaseException as exc:  # noqa: BLE001 - the exception is part of the behaviour
        out.append(["raise", type_name(type(exc))])
    return out


def _key(encoded: Any) -> str:
    return json.dumps(encoded, sort_keys=True)


# ---------------------------------------------------------------------------- equality


def same(a: Any, b: Any) -> bool:
    """Whether two encodings (or two outcomes) are equal, as the module docstring says."""
    if type(a) is bool or type(b) is bool:
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return _close(a, b)
    if not isinstance(a, list) or not isinstance(b, list):
        return type(a) is type(b) and a == b
    if len(a) != len(b) or not a or a[0] != b[0]:
        return False
    if a[0] == "set" or a[0] == "bag":  # order-free, exact: elements are sorted encodings
        return _key(a) == _key(b)
    if a[0] == "dict":
        pairs = zip(a[2:], b[2:], strict=True)
        return a[1] == b[1] and all(_key(x[0]) == _key(y[0]) and same(x[1], y[1])
                                    for x, y in pairs)
    return all(same(x, y) for x, y in zip(a[1:], b[1:], strict=True))


def _close(a: float, b: float) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b or math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL)


# ---------------------------------------------------------------------------- the harness


class _Timeout(BaseException):
    """Raised by the alarm; a BaseException so that ``except Exception`` cannot swallow it."""


_armed = [False]


def _alarm(signum: int, frame: Any) -> None:
    if _armed[0]:
        raise _Timeout()


def resolve(module: str, qualname: str, role: str = "call") -> Any:
    """The plain function behind ``module.qualname``: methods, static and class methods,
    property accessors (``role`` fget/fset/fdel) and ``functools.wraps`` wrappers unwrapped."""
    obj: Any = importlib.import_module(module)
    parts = qualname.split(".")
    for part in parts[:-1]:
        obj = getattr(obj, part)
    raw = vars(obj).get(parts[-1]) if isinstance(obj, type) else getattr(obj, parts[-1])
    if raw is None:
        raise AttributeError(f"{module}.{qualname} is not defined")
    if isinstance(raw, (staticmethod, classmethod)):
        raw = raw.__func__
    elif isinstance(raw, property):
        raw = getattr(raw, role if role in ("fget", "fset", "fdel") else "fget")
    elif hasattr(raw, "func") and type(raw).__name__ == "cached_property":
        raw = raw.func
    return inspect.unwrap(raw)


def call_one(fn: Any, args: list[Any], kwargs: dict[str, Any]) -> list[Any]:
    """The outcome of ``fn(*args, **kwargs)``: the encoded result and mutable arguments, or
    the exception type."""
    try:
        result = fn(*args, **kwargs)
        if inspect.iscoroutine(result):
            import asyncio

            result = asyncio.run(result)
    except BaseException as exc:  # noqa: BLE001 - raising is an outcome like returning
        return ["raise", type_name(type(exc))]
    outcome = ["return", encode(result)]
    mutable = [a for a in [*args, *kwargs.values()] if not _immutable(a)]
    if mutable:
        outcome.append(encode(mutable))
    return outcome


def _immutable(value: Any) -> bool:
    if type(value) is tuple:
        return all(_immutable(v) for v in value)
    return type(value) in _IMMUTABLE or hasattr(type(value), "__next__")


def _guarded(timeout: float, thunk: Any) -> Any:
    """``thunk()`` under the alarm; ``["timeout"]`` when it fires first."""
    _armed[0] = True
    # repeats every 50 ms until disarmed, in case the code under test catches one
    signal.setitimer(signal.ITIMER_REAL, timeout, 0.05)
    try:
        return thunk()
    except _Timeout:
        return ["timeout"]
    finally:
        _armed[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)


def _resolve_or_error(info: dict[str, Any]) -> Any:
    try:
        return resolve(info["module"], info["qualname"], info.get("role", "call"))
    except _Timeout:
        raise
    except BaseException as exc:  # noqa: BLE001 - missing or broken: every case fails
        return ["error", f"resolve: {type_name(type(exc))}"]


def _decode_and_call(fn: Any, case: dict[str, Any]) -> list[Any]:
    try:
        args = [pickle.loads(base64.b64decode(a)) for a in case["args"]]
        kwargs = {k: pickle.loads(base64.b64decode(v)) for k, v in case["kwargs"].items()}
    except BaseException as exc:  # noqa: BLE001 - an input this code cannot rebuild
        return ["error", f"input: {type_name(type(exc))}"]
    return call_one(fn, args, kwargs)


def _function(fns: dict[str, Any], spec: dict[str, Any], key: str, timeout: float) -> Any:
    """The function a case calls, looked up once, in this process, with a longer limit than
    calls get (a failure is kept as its outcome, an ``["error", ...]`` list)."""
    if key not in fns:
        info = spec["functions"][key]
        fns[key] = _guarded(max(10.0, 5 * timeout), lambda: _resolve_or_error(info))
    return fns[key]


def _in_child(timeout: float, thunk: Any, keep_out: int) -> tuple[list[Any], float]:
    """``thunk()`` in a forked child that is killed at ``timeout``: no call can hang the
    harness (even one that swallows every exception), crash it, or leave state behind.
    Returns the outcome and the child's CPU seconds."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no way to the result lines, only to this pipe
        os.close(read)
        os.close(keep_out)
        try:
            data = json.dumps(thunk()).encode()
        except BaseException as exc:  # noqa: BLE001 - an outcome that cannot be encoded
            data = json.dumps(["error", f"encode: {type_name(type(exc))}"]).encode()
        try:
            _write_all(write, data)
        finally:
            os._exit(0)
    os.close(write)
    chunks, deadline, done = [], time.monotonic() + timeout, False
    while not done:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([read], [], [], left)[0]:
            break
        chunk = os.read(read, 1 << 16)
        chunks.append(chunk)
        done = not chunk
    os.close(read)
    if not done:
        os.kill(pid, signal.SIGKILL)
    usage = os.wait4(pid, 0)[2]
    cpu = usage.ru_utime + usage.ru_stime
    if not done:
        return ["timeout"], cpu
    try:
        return list(json.loads(b"".join(chunks))), cpu
    except ValueError:
        return ["error", "crashed"], cpu


def main(argv: list[str]) -> int:
    """``differential.py INPUTS.json``: prints ``MARK`` + JSON ``{"id", "out", "s"}`` per case."""
    with open(argv[0], encoding="utf-8") as f:
        spec = json.load(f)
    out = os.dup(1)
    # what the code under test prints goes nowhere, so it cannot break the result lines
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    sys.path.insert(0, os.getcwd())
    signal.signal(signal.SIGALRM, _alarm)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 3000))
    fns: dict[str, Any] = {}
    timeout = float(spec["call_timeout"])
    for case in spec["cases"]:
        # only the call counts, in CPU time: neither the import that comes with a
        # function's first case nor a loaded machine's queue makes a quick call look slow
        # (recording drops slow calls)
        fn = _function(fns, spec, case["fn"], timeout)
        outcome, cpu = (fn, 0.0) if isinstance(fn, list) else \
            _in_child(timeout, functools.partial(_decode_and_call, fn, case), out)
        line = json.dumps({"id": case["id"], "out": outcome, "s": round(cpu, 4)})
        _write_all(out, (MARK + line + "\n").encode("utf-8", "surrogatepass"))
    return 0


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data):]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
