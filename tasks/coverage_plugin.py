"""A pytest plugin that records which functions of the repository each test calls.

It runs inside a container of a task's image (``-p repogym_coverage``, from a folder on
``PYTHONPATH``), so it imports only the standard library and runs on Python 3.9. Every code
object whose first call falls inside a test (its setup, call and teardown) is kept for that
test; what runs outside any test (imports, collection) is kept under ``COLLECTION``. At the
end it writes, for code under the repository's root only, ``{"tests": {nodeid: [key, ...]},
"collection": [...], "outcomes": {nodeid: outcome}, "modules": {name: file}}`` where a key is
``path:first line:name``.

Python 3.12 and later use ``sys.monitoring``: a code object's start event is turned off once
seen and turned back on at the next test, so a test costs one event per function it calls.
Older Pythons use ``sys.settrace`` with a global function that returns at once (no line
events). Threads started by the tests are traced too; subprocesses are not (see the README).

With ``REPOGYM_COVERAGE_ENTRIES=1`` it also keeps, per test, the functions the test's own code
called directly, and the message of each failure (``failures``): the facts a problem
statement is written from.
"""

from __future__ import annotations

import json
import os
import sys
import threading

import pytest

ROOT = os.environ.get("REPOGYM_COVERAGE_ROOT", "/testbed").rstrip("/") + "/"
OUT = os.environ.get("REPOGYM_COVERAGE_OUT", "/opt/repogym-grade/out/coverage.json")
ENTRIES = os.environ.get("REPOGYM_COVERAGE_ENTRIES") == "1"
PACKAGES = [p for p in os.environ.get("REPOGYM_COVERAGE_PACKAGES", "").split(",") if p]
COLLECTION = "<collection>"
TOOL_ID = 4  # sys.monitoring's last free tool id: coverage.py takes 1, profilers 2 and 3


def _is_test_file(path):
    rel = path[len(ROOT):] if path.startswith(ROOT) else path
    parts = rel.split("/")
    name = parts[-1]
    stem = name.split(".", 1)[0]
    dirs = {"test", "tests", "testing", "e2e", "__tests__"}
    return (any(p.lower() in dirs for p in parts[:-1]) or name == "conftest.py"
            or stem.startswith("test_") or stem.endswith("_test"))


class Recorder:
    def __init__(self):
        self.current = set()
        self.seen = {COLLECTION: self.current}
        self.entries = {}
        self.failures = {}
        self.outcomes = {}
        self.kinds = {}  # code -> "lib", "test" or "" (outside the root)
        self.monitoring = hasattr(sys, "monitoring") and not ENTRIES

    # --- the hot path --------------------------------------------------------------------

    def on_start(self, code, offset):  # sys.monitoring's PY_START
        self.current.add(code)
        return sys.monitoring.DISABLE

    def on_call(self, frame, event, arg):  # sys.settrace's global function
        if event == "call":
            self.current.add(frame.f_code)
        return None

    def on_call_entries(self, frame, event, arg):
        if event != "call":
            return None
        code = frame.f_code
        self.current.add(code)
        if self._kind(code) == "lib" and frame.f_back is not None \
                and self._kind(frame.f_back.f_code) == "test":
            self.entry.add(code)
        return None

    def _kind(self, code):
        kind = self.kinds.get(code)
        if kind is None:
            path = code.co_filename or ""
            kind = "" if not path.startswith(ROOT) else ("test" if _is_test_file(path) else
                                                          "lib")
            self.kinds[code] = kind
        return kind

    # --- contexts ------------------------------------------------------------------------

    def start(self):
        if self.monitoring:
            mon = sys.monitoring
            mon.use_tool_id(TOOL_ID, "repogym-coverage")
            mon.register_callback(TOOL_ID, mon.events.PY_START, self.on_start)
            mon.set_events(TOOL_ID, mon.events.PY_START)
        else:
            hook = self.on_call_entries if ENTRIES else self.on_call
            threading.settrace(hook)
            sys.settrace(hook)

    def stop(self):
        if self.monitoring:
            sys.monitoring.set_events(TOOL_ID, 0)
            sys.monitoring.free_tool_id(TOOL_ID)
        else:
            sys.settrace(None)
            threading.settrace(None)

    def begin(self, nodeid):
        self.current = self.seen.setdefault(nodeid, set())
        self.entry = self.entries.setdefault(nodeid, set())
        if self.monitoring:
            sys.monitoring.restart_events()

    def end(self):
        self.current = self.seen[COLLECTION]
        self.entry = set()
        if self.monitoring:
            sys.monitoring.restart_events()

    # --- the result ----------------------------------------------------------------------

    def key(self, code):
        name = getattr(code, "co_qualname", code.co_name)
        return f"{code.co_filename[len(ROOT):]}:{code.co_firstlineno}:{name}"

    def keys(self, codes):
        return sorted({self.key(c) for c in codes if self._kind(c) == "lib"})

    def dump(self):
        modules = {}
        for name in PACKAGES:
            module = sys.modules.get(name)
            if module is not None:
                modules[name] = getattr(module, "__file__", None) or ""
        data = {
            "python": "{}.{}".format(*sys.version_info[:2]),
            "collection": self.keys(self.seen[COLLECTION]),
            "tests": {t: self.keys(c) for t, c in self.seen.items() if t != COLLECTION},
            "outcomes": self.outcomes, "modules": modules,
        }
        if ENTRIES:
            data["entries"] = {t: self.keys(c) for t, c in self.entries.items() if c}
            data["failures"] = self.failures
        folder = os.path.dirname(OUT)
        if folder and not os.path.isdir(folder):
            os.makedirs(folder)
        with open(OUT, "w") as f:
            json.dump(data, f)


RECORDER = Recorder()
RECORDER.entry = set()


def pytest_configure(config):
    RECORDER.start()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    RECORDER.begin(item.nodeid)
    try:
        yield
    finally:
        RECORDER.end()


def pytest_runtest_logreport(report):
    outcome = report.outcome
    if report.when == "call" or outcome != "passed":
        worst = RECORDER.outcomes.get(report.nodeid)
        if worst in (None, "passed"):
            RECORDER.outcomes[report.nodeid] = outcome
    if ENTRIES and report.failed and report.nodeid not in RECORDER.failures:
        crash = getattr(report.longrepr, "reprcrash", None)
        message = getattr(crash, "message", None) or _error_lines(str(report.longrepr))
        RECORDER.failures[report.nodeid] = {"when": report.when, "message": message[:4000]}


def _error_lines(text):
    """The exception lines (``E   ...``) of a failure's long report, without the code."""
    lines = [line[1:].strip() for line in text.splitlines() if line.startswith("E ")]
    return "\n".join(lines) if lines else text.strip().splitlines()[-1:][0] if text.strip() \
        else ""


def pytest_collectreport(report):
    if ENTRIES and report.failed:
        RECORDER.failures["<collection>:" + (report.nodeid or ".")] = {
            "when": "collect", "message": _error_lines(str(report.longrepr))[:4000]}


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    RECORDER.stop()
    RECORDER.dump()
