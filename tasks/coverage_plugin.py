"""A pytest plugin that records which functions of the repository each test calls.

It runs inside a container of a task's image (``-p repogym_coverage``, from a folder on
``PYTHONPATH``), so it imports only the standard library and runs on Python 3.9.

Map mode (the default): when the plugin is imported, before any conftest, an import hook
takes over the loading of the repository's library modules (Python files under the root that
are not tests) and compiles each with one statement added at the top of every function body,
``__repogym_hits__.add(N)``. ``__repogym_hits__`` lives in ``builtins`` and is swapped for a
fresh set at each test, so a call costs one set insertion and nothing else runs slower. The
functions a test called are those whose number landed in its set (setup, call and teardown);
what ran outside any test (imports, collection) is kept under ``COLLECTION``. Line numbers are
untouched (the statement takes the first body line's number), so are tracebacks. A library
module imported before the hook could take it is listed in ``unmapped``: its functions are
not recorded, and a change there reaches every test.

Entries mode (``REPOGYM_COVERAGE_ENTRIES=1``, for the few failing tests a statement is
written from): ``sys.settrace`` keeps, per test, the library functions the test's own code
called directly, and the message of each failure (``failures``).

The result is one JSON file: ``{"tests": {nodeid: [key, ...]}, "collection": [...],
"unmapped": [...], "modules": {package: file}, ...}`` where a key is ``path:line:name``.
"""

from __future__ import annotations

import ast
import builtins
import importlib.abc
import importlib.machinery
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
HITS = "__repogym_hits__"
TEST_DIRS = {"test", "tests", "testing", "e2e", "__tests__"}


def _is_test_file(path):
    rel = path[len(ROOT):] if path.startswith(ROOT) else path
    parts = rel.split("/")
    name = parts[-1]
    stem = name.split(".", 1)[0]
    return (any(p.lower() in TEST_DIRS for p in parts[:-1]) or name == "conftest.py"
            or stem.startswith("test_") or stem.endswith("_test"))


def _is_library(path):
    return bool(path) and path.startswith(ROOT) and path.endswith(".py") \
        and not _is_test_file(path)


# ---------------------------------------------------------------------------- map mode


class Instrumenter(ast.NodeTransformer):
    """Adds ``__repogym_hits__.add(N)`` at the top of every function body of one module."""

    def __init__(self, register):
        self.register = register

    def visit_FunctionDef(self, node):
        self.generic_visit(node)
        start = min([node.lineno] + [d.lineno for d in node.decorator_list])
        number = self.register(start, node.name)
        body = node.body
        doc = getattr(body[0], "value", None) if body else None
        first = 1 if (isinstance(body[0], ast.Expr) and isinstance(doc, ast.Constant)
                      and isinstance(doc.value, str)) else 0
        anchor = body[first] if first < len(body) else body[-1]
        hit = ast.Expr(ast.Call(
            ast.Attribute(ast.Name(HITS, ast.Load()), "add", ast.Load()),
            [ast.Constant(number)], []))
        for child in ast.walk(hit):  # where the first statement starts, taking no room
            ast.copy_location(child, anchor)
            setattr(child, "end_lineno", anchor.lineno)  # noqa: B010 - any node's field
            setattr(child, "end_col_offset", anchor.col_offset)  # noqa: B010
        node.body = body[:first] + [hit] + body[first:]
        return node

    visit_AsyncFunctionDef = visit_FunctionDef


class Loader(importlib.machinery.SourceFileLoader):
    """Compiles a library module with its functions instrumented (never from a cache)."""

    table: list[tuple[str, int, str]] = []  # number -> (path, line, name)

    def get_code(self, fullname):
        path = self.get_filename(fullname)
        source = self.get_data(path)
        try:
            tree = ast.parse(source, path)
        except SyntaxError:
            return super().get_code(fullname)
        rel = path[len(ROOT):]

        def register(line, name):
            Loader.table.append((rel, line, name))
            return len(Loader.table) - 1

        tree = Instrumenter(register).visit(tree)
        return compile(tree, path, "exec", dont_inherit=True)


class Finder(importlib.abc.MetaPathFinder):
    """Finds modules with the finders that follow it; takes over the library's own."""

    def find_spec(self, fullname, path=None, target=None):
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is None:
                continue
            origin = spec.origin or ""
            if _is_library(origin) and isinstance(spec.loader,
                                                   importlib.machinery.SourceFileLoader):
                spec.loader = Loader(fullname, origin)
            return spec
        return None


# ---------------------------------------------------------------------------- entries mode


class Tracer:
    """The library functions a test's own code calls directly (``sys.settrace``)."""

    def __init__(self):
        self.kinds = {}
        self.entry = set()

    def _kind(self, code):
        kind = self.kinds.get(code)
        if kind is None:
            path = code.co_filename or ""
            kind = "" if not path.startswith(ROOT) else ("test" if _is_test_file(path)
                                                         else "lib")
            self.kinds[code] = kind
        return kind

    def __call__(self, frame, event, arg):
        if event == "call" and frame.f_back is not None \
                and self._kind(frame.f_code) == "lib" \
                and self._kind(frame.f_back.f_code) == "test":
            code = frame.f_code
            name = getattr(code, "co_qualname", code.co_name)
            self.entry.add(f"{code.co_filename[len(ROOT):]}:{code.co_firstlineno}:{name}")
        return None


# ---------------------------------------------------------------------------- the record


class Recorder:
    def __init__(self):
        self.hits: dict[str, set[int]] = {COLLECTION: set()}
        self.entries: dict[str, set[str]] = {}
        self.failures: dict[str, dict[str, str]] = {}
        self.outcomes: dict[str, str] = {}
        self.tracer = Tracer() if ENTRIES else None
        setattr(builtins, HITS, self.hits[COLLECTION])
        if self.tracer is not None:
            threading.settrace(self.tracer)
            sys.settrace(self.tracer)
        else:
            sys.meta_path.insert(0, Finder())
        # library modules already imported cannot be instrumented any more
        self.early = sorted({getattr(m, "__file__", None) or "" for m in list(sys.modules.values())
                             if _is_library(getattr(m, "__file__", None) or "")})

    def begin(self, nodeid):
        setattr(builtins, HITS, self.hits.setdefault(nodeid, set()))
        if self.tracer is not None:
            self.tracer.entry = self.entries.setdefault(nodeid, set())

    def end(self):
        setattr(builtins, HITS, self.hits[COLLECTION])
        if self.tracer is not None:
            self.tracer.entry = set()

    def keys(self, numbers):
        table = Loader.table
        return sorted({f"{table[n][0]}:{table[n][1]}:{table[n][2]}" for n in numbers})

    def dump(self):
        if self.tracer is not None:
            sys.settrace(None)
            threading.settrace(None)
        modules = {name: getattr(sys.modules[name], "__file__", None) or ""
                   for name in PACKAGES if name in sys.modules}
        unmapped = set(self.early)
        for module in list(sys.modules.values()):
            path = getattr(module, "__file__", None) or ""
            if _is_library(path) and not isinstance(getattr(module, "__loader__", None), Loader):
                unmapped.add(path)
        data = {
            "python": "{}.{}".format(*sys.version_info[:2]),
            "mode": "entries" if ENTRIES else "map",
            "collection": self.keys(self.hits[COLLECTION]),
            "tests": {t: self.keys(h) for t, h in self.hits.items() if t != COLLECTION},
            "unmapped": sorted(p[len(ROOT):] for p in unmapped),
            "outcomes": self.outcomes, "modules": modules,
        }
        if ENTRIES:
            data["entries"] = {t: sorted(e) for t, e in self.entries.items() if e}
            data["failures"] = self.failures
            data["unmapped"] = []
        folder = os.path.dirname(OUT)
        if folder and not os.path.isdir(folder):
            os.makedirs(folder)
        with open(OUT, "w") as f:
            json.dump(data, f)


RECORDER = Recorder()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    RECORDER.begin(item.nodeid)
    try:
        yield
    finally:
        RECORDER.end()


def _error_lines(text):
    """The exception lines (``E   ...``) of a failure's long report, without the code."""
    lines = [line[1:].strip() for line in text.splitlines() if line.startswith("E ")]
    if lines:
        return "\n".join(lines)
    rest = text.strip().splitlines()
    return rest[-1] if rest else ""


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


def pytest_collectreport(report):
    if ENTRIES and report.failed:
        RECORDER.failures["<collection>:" + (report.nodeid or ".")] = {
            "when": "collect", "message": _error_lines(str(report.longrepr))[:4000]}


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    RECORDER.dump()
