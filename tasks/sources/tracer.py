"""The tracer of replication tasks, inside a task's container, and the run that carries it.

While the tests that a removal breaks run, :class:`Tracer` (a profiler loaded through
``sitecustomize``) pickles the arguments of every call to a removed function and writes them
when the process exits. This file travels into the container as ``repogym_trace`` (with the
gold cases' tracer, :mod:`.boundary`, which builds on it), so it imports only the standard
library and runs on Python 3.9. :func:`traced_run` is the host's side: it sends the tracers,
runs the failing tests (by id where it can, else their files) under them and reads back what
they wrote.
"""

from __future__ import annotations

import atexit
import base64
import hashlib
import inspect
import json
import os
import pickle
import shlex
import sys
import threading
from typing import Any

_RESUMABLE = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


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


def traced_run(box: Any, test_cmd: str, test_files: list[str], timeout: float,
               tracers: dict[str, bytes], sitecustomize: str, spec: dict[str, Any],
               trace_dir: str, out_dir: str, dumps: str, ids: list[list[str]] | None = None
               ) -> list[dict[str, Any]]:
    """Runs ``test_files`` with ``test_cmd`` in ``box`` with the tracers on (``tracers``:
    file name in ``trace_dir`` -> source; ``sitecustomize`` starts one with ``spec``) and
    returns every JSON file they wrote in ``out_dir`` whose name matches ``dumps``.

    ``ids``: selections of node ids (the failing tests' and a few of their neighbours', then
    the failing tests' alone), run instead of the files where pytest finds them (a file's
    every test would run under the tracer: minutes on a large file). A run that pytest could
    not make (an id it did not find) is followed by the next selection, the files last."""
    sub = trace_dir.removeprefix("/opt/")
    box.put_files({**{f"{sub}/{name}": source for name, source in tracers.items()},
                   f"{sub}/sitecustomize.py": sitecustomize.encode(),
                   f"{sub}/config.json": json.dumps(spec).encode()}, "/opt")
    _root(box, f"mkdir -p {out_dir} && chown 1000:1000 {out_dir}")
    by_id = [[i for i in chosen if i.split("::")[0].endswith(".py")] for chosen in ids or ()]
    files = [f for f in test_files if f.endswith(".py")]
    from repogym.envs.grading import plugins  # the host's side: this file travels alone

    installed = plugins.plugin_args(plugins.installed(box, box.config.image))
    for selection in [s for s in by_id if s] + [files]:
        command = (f"{test_cmd} -p no:cacheprovider -o addopts= "
                   + " ".join(shlex.quote(f) for f in [*installed, *selection]))
        result = box.exec(["env", f"PYTHONPATH={trace_dir}",
                           f"REPOGYM_TRACE={trace_dir}/config.json",
                           "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1", "PYTHONDONTWRITEBYTECODE=1",
                           "PYTHONHASHSEED=0", "bash", "-c", command], timeout=timeout)
        # pytest's "not found" (4) and "no tests ran" (5): the ids missed, the files go next
        if selection is files or result.exit_code not in (4, 5):
            break
        _root(box, f"rm -f {out_dir}/{dumps}")
    out = _root(box, f"for f in {out_dir}/{dumps}; do [ -e \"$f\" ] && base64 -w0 \"$f\"; "
                "echo; done")
    return [json.loads(base64.b64decode(line)) for line in out.split()]


def _root(box: Any, script: str, timeout: float = 120) -> str:
    return str(box.exec(["bash", "-c", script], user="root", timeout=timeout,
                        limit=64 * 1024 * 1024).output)


def own_source() -> bytes:
    """This file, as the container's ``repogym_trace``."""
    with open(__file__, "rb") as f:
        return f.read()
