"""The tracer that records the inputs of gold cases, inside a task's container.

It runs in the test process (loaded through ``sitecustomize``, like
:class:`repogym.tasks.sources.tracer.Tracer`) while the task's tests run on the gold code, and
pickles the arguments of two kinds of calls into the repository's code:

- **boundary calls**: calls that cross from test code into the package, the API the tests use.
  A call counts when the frame that made it is a test file's, or a wrapper (a function nested
  in another, as decorators make them) that a test called. These are what lets a fix made in
  another function than the gold patch's still agree.
- **calls to the patch's functions**: every call, from anywhere, to a function the gold patch
  changes or adds (the host finds them from the patch and the AST and names their places).

A function is keyed by where its code starts (``path:line:name``); the host turns keys into
qualnames with the AST.

**A time budget** (``budget`` seconds of the traced run, 0: none): every call of the test
process goes through the tracer, and tests that make millions of calls (more-itertools'
prime-number tests: 32 s alone, 100 s traced) cost minutes for calls beyond what it keeps.
Once the budget is spent the tracer writes what it saw and ends the process: what the tests
called until then are the inputs (a run cut short says so, ``stopped``).

Like the replication tracer (which travels with it as
``repogym_trace``), this file imports only the standard library and runs on Python 3.9.
"""

from __future__ import annotations

import atexit
import base64
import hashlib
import inspect
import json
import os
import pickle
import sys
import threading
import time
from typing import Any

try:  # on the host
    from repogym.tasks.sources.tracer import arguments
except ImportError:  # in the container, next to the replication tracer
    from repogym_trace import arguments  # type: ignore[import-not-found,no-redef]

_RESUMABLE = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
# what the harness cannot call by name: module bodies, lambdas, comprehensions
_ANONYMOUS = ("<module>", "<lambda>", "<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>")
# kinds of code objects
OTHER, WRAPPER, TEST, PACKAGE, TARGET = range(5)
# the test files' names (the same rules as ``repogym.tasks.sources.common.is_test_path``)
TEST_DIRS = frozenset({"test", "tests", "testing", "e2e", "__tests__"})
TEST_FILES = frozenset({"conftest.py", "pytest.ini", "tests.py", "test.py"})
MAX_WRAPPERS = 3  # nested package frames walked through to find the test that called
MAX_TESTS = 50  # names of the tests that called a function, kept per function
CLOCK_EVERY = 4096  # calls between two looks at the clock (the budget's)


def is_test_file(relpath: str) -> bool:
    parts = relpath.split("/")
    name = parts[-1]
    stem = name.split(".", 1)[0]
    if any(part.lower() in TEST_DIRS for part in parts[:-1]):
        return True
    return name in TEST_FILES or stem.startswith("test_") or stem.endswith("_test")


class GoldTracer:
    """Keeps the pickled arguments of boundary calls and of calls to the targets (dicts with
    ``path`` and ``lines``, the lines a code object of theirs may start on, and ``name``)."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.root = os.path.realpath(config["root"]).rstrip("/") + "/"
        self.places = {(os.path.realpath(t["path"]), t["name"], line)
                       for t in config["targets"] for line in t["lines"]}
        self.max_calls, self.max_bytes = config["max_calls"], config["max_bytes"]
        self.max_functions = config["max_functions"]
        budget = float(config.get("budget") or 0)
        self.deadline = time.monotonic() + budget if budget > 0 else None
        self.out = config.get("out", "")
        self.seen = 0  # calls seen, for the clock
        self.stopped = ""  # why the run was cut short, if it was
        self.kinds: dict[Any, int] = {}
        self.keys: dict[Any, str] = {}
        self.starts: dict[Any, int] = {}  # a generator's code: where its first entry stands
        self.functions: dict[str, dict[str, Any]] = {}
        self.calls: dict[str, dict[str, dict[str, Any]]] = {}

    def profile(self, frame: Any, event: str, arg: Any) -> None:
        if event != "call":
            return
        if self.deadline is not None:
            self.seen += 1
            if self.seen % CLOCK_EVERY == 0 and time.monotonic() > self.deadline:
                self.end("budget")
        code = frame.f_code
        kind = self.kinds.get(code)
        if kind is None:
            kind = self.kinds[code] = self._kind(code)
        if kind < PACKAGE:
            return
        test = self._test(frame.f_back)
        if kind == PACKAGE and test is None:
            return
        # a generator's frame reports a "call" each time it resumes; only its start counts
        if code.co_flags & _RESUMABLE and self.starts.setdefault(code, frame.f_lasti) \
                != frame.f_lasti:
            return
        self._record(code, frame, kind, test)

    def _kind(self, code: Any) -> int:
        name = code.co_filename or "<>"
        path = os.path.realpath(name) if not name.startswith("<") else ""  # not "<frozen ...>"
        if not path.startswith(self.root) or "/site-packages/" in path:
            return OTHER
        if is_test_file(path[len(self.root):]):
            return TEST
        if (path, code.co_name, code.co_firstlineno) in self.places:
            return TARGET
        if code.co_name in _ANONYMOUS:
            return OTHER
        return WRAPPER if code.co_flags & inspect.CO_NESTED else PACKAGE

    def _test(self, frame: Any) -> str | None:
        """The name of the test code that made this call (through wrappers), or None."""
        for _ in range(MAX_WRAPPERS + 1):
            if frame is None:
                return None
            kind = self.kinds.get(frame.f_code)
            if kind is None:
                kind = self.kinds[frame.f_code] = self._kind(frame.f_code)
            if kind != WRAPPER:
                return frame.f_code.co_name if kind == TEST else None
            frame = frame.f_back
        return None

    def _key(self, code: Any, frame: Any, kind: int) -> str | None:
        key = self.keys.get(code)
        if key is not None:
            return key
        if kind != TARGET and len(self.functions) >= self.max_functions:
            return None
        path = os.path.realpath(code.co_filename)
        key = f"{path[len(self.root):]}:{code.co_firstlineno}:{code.co_name}"
        self.keys[code] = key
        self.functions.setdefault(key, {
            "path": path[len(self.root):], "line": code.co_firstlineno, "name": code.co_name,
            "module": frame.f_globals.get("__name__"), "from_tests": 0, "tests": [],
            "attempts": 0, "skipped": 0})
        self.calls.setdefault(key, {})
        return key

    def _record(self, code: Any, frame: Any, kind: int, test: str | None) -> None:
        key = self._key(code, frame, kind)
        if key is None:
            return
        info, calls = self.functions[key], self.calls[key]
        if test is not None:
            info["from_tests"] += 1
            if test not in info["tests"] and len(info["tests"]) < MAX_TESTS:
                info["tests"].append(test)
        # a function called a million times with the same arguments is pickled a bounded time
        if len(calls) >= self.max_calls or info["attempts"] >= 4 * self.max_calls:
            return
        info["attempts"] += 1
        try:
            args, kwargs = arguments(code, frame.f_locals)
            blobs = [pickle.dumps(a, 4) for a in args]
            named = {k: pickle.dumps(v, 4) for k, v in sorted(kwargs.items())}
        except Exception:  # noqa: BLE001 - unpicklable arguments (lambdas, files) are skipped
            info["skipped"] += 1
            return
        if sum(map(len, blobs)) + sum(map(len, named.values())) > self.max_bytes:
            info["skipped"] += 1
            return
        digest = hashlib.sha1(repr((blobs, named)).encode()).hexdigest()
        calls.setdefault(digest, {
            "args": [base64.b64encode(b).decode() for b in blobs],
            "kwargs": {k: base64.b64encode(v).decode() for k, v in named.items()}})

    def end(self, why: str) -> None:
        """The budget is spent: what was seen is written and the process ends at once (the
        rest of the run would only be slower tests, none of their calls kept)."""
        self.stopped = why
        self.dump(self.out)
        os._exit(0)

    def dump(self, out_dir: str) -> None:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
        data = {"functions": self.functions,
                "calls": {k: list(v.values()) for k, v in self.calls.items()},
                **({"stopped": self.stopped} if self.stopped else {})}
        with open(os.path.join(out_dir, f"gold-{os.getpid()}.json"), "w") as f:
            json.dump(data, f)


def start(config_path: str) -> GoldTracer:
    """Traces this process (and its threads) until it exits, then writes what it saw."""
    with open(config_path) as f:
        config = json.load(f)
    tracer = GoldTracer(config)
    atexit.register(tracer.dump, config["out"])
    threading.setprofile(tracer.profile)
    sys.setprofile(tracer.profile)
    return tracer
