"""Recording the cases of differential testing: which functions a task removed, the tracer in a
real traced process, the inputs hypothesis adds, and (in Docker) a module-granularity task whose
agreement gives per-function partial credit."""

from __future__ import annotations

import base64
import json
import os
import pickle
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from repogym.tasks.sources import trace, tracer
from repogym.tasks.sources.inputs import annotation_strategy, generate_calls, plain_value
from repogym.tasks.sources.targets import target_functions
from repogym.tasks.sources.trace import TraceConfig

SHAPES = textwrap.dedent('''\
    """Shapes."""
    import functools


    def area(width: float, height: float = 1.0) -> float:
        """Width times height."""
        if width < 0:
            raise ValueError("negative")
        return width * height


    @functools.lru_cache(maxsize=None)
    def steps(n: int, *extra: int, scale: int = 1) -> list[int]:
        out = [i * scale for i in range(n)]
        return out + list(extra)


    def countdown(n):
        while n > 0:
            yield n
            n -= 1


    def stub():
        raise NotImplementedError


    class Box:
        def __init__(self, side):
            self.side = side
            self.log = []

        def grow(self, by=1):
            self.side += by
            self.log.append(by)
            return self.side

        @property
        def volume(self):
            return self.side ** 3

        @volume.setter
        def volume(self, value):
            self.side = round(value ** (1 / 3))
            self.log.append("set")
    ''')

SHAPES_TESTS = textwrap.dedent('''\
    import pytest
    from shapes import Box, area, countdown, steps


    def test_area():
        assert area(2.0, 3.0) == 6.0
        assert area(width=4.0) == 4.0
        with pytest.raises(ValueError):
            area(-1.0)


    def test_steps():
        assert steps(3, 9, scale=2) == [0, 2, 4, 9]


    def test_countdown():
        assert list(countdown(3)) == [3, 2, 1]
        assert list(countdown(2)) == [2, 1]


    def test_box():
        box = Box(2)
        assert box.grow() == 3 and box.grow(by=2) == 5
        assert box.volume == 125
        box.volume = 27.0
        assert box.side == 3
        assert area(float(len([lambda: 1])), 2.0) == 2.0


    def test_unpicklable_arguments_are_skipped():
        assert area(1.0, height=HeightLike()) == 2.0


    class HeightLike(float):
        def __new__(cls):
            return float.__new__(cls, 2.0)

        def __reduce__(self):
            raise TypeError("not picklable")
    ''')

REFERENCE = {"file": "shapes.py", "qualname": "", "granularity": "module"}


# --- targets ----------------------------------------------------------------------------------


def test_targets_per_granularity_with_roles_lines_and_annotations() -> None:
    found = {t.key: t for t in target_functions(SHAPES, REFERENCE)}
    assert list(found) == ["area", "steps", "countdown", "Box.__init__", "Box.grow",
                           "Box.volume", "Box.volume#1"]  # the stub is not a removed function
    area, steps = found["area"], found["steps"]
    assert area.module == "shapes" and area.params == ("width", "height") and area.required == 1
    assert area.annotations == {"width": "float", "height": "float"}
    assert steps.lines == (12, 13) and steps.vararg == "extra"  # decorator line and def line
    assert (found["Box.volume"].role, found["Box.volume#1"].role) == ("fget", "fset")
    box = target_functions(SHAPES, {"file": "shapes.py", "qualname": "Box",
                                    "granularity": "class"})
    assert [t.key for t in box] == ["Box.__init__", "Box.grow", "Box.volume", "Box.volume#1"]
    one = target_functions(SHAPES, {"file": "pkg/shapes.py", "qualname": "Box.grow",
                                    "granularity": "function"})
    assert [(t.key, t.module, t.harness_entry()["role"]) for t in one] == \
        [("Box.grow", "pkg.shapes", "call")]


def test_config_says_what_to_change() -> None:
    with pytest.raises(ValueError, match="slow_call"):
        TraceConfig(slow_call=3.0, call_timeout=2.0)
    with pytest.raises(ValueError, match="not both 0"):
        TraceConfig(max_traced=0, max_generated=0)


# --- the tracer in a real process -------------------------------------------------------------


def run_traced(folder: Path, max_calls: int = 100) -> dict[str, Any]:
    """The toy's tests under the tracer, loaded the way the task's container loads it."""
    (folder / "shapes.py").write_text(SHAPES)
    (folder / "test_shapes.py").write_text(SHAPES_TESTS)
    hook = folder / "hook"
    hook.mkdir()
    shutil.copy(tracer.__file__, hook / "repogym_trace.py")
    (hook / "sitecustomize.py").write_text(trace.SITECUSTOMIZE)
    out = folder / "out"
    out.mkdir()
    targets = target_functions(SHAPES, REFERENCE)
    config = {"targets": [{"key": t.key, "path": str(folder / "shapes.py"), "name": t.name,
                           "lines": list(t.lines)} for t in targets],
              "out": str(out), "max_calls": max_calls, "max_bytes": 4096}
    (hook / "config.json").write_text(json.dumps(config))
    env = {**os.environ, "PYTHONPATH": str(hook), "REPOGYM_TRACE": str(hook / "config.json"),
           "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "test_shapes.py"], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:]
    [dump] = list(out.glob("trace-*.json"))
    return dict(json.loads(dump.read_text()))


def load(call: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    return ([pickle.loads(base64.b64decode(a)) for a in call["args"]],
            {k: pickle.loads(base64.b64decode(v)) for k, v in call["kwargs"].items()})


def test_tracer_records_calls_as_the_function_received_them(tmp_path: Path) -> None:
    sys.path.insert(0, str(tmp_path))  # to unpickle the toy's Box here
    try:
        data = run_traced(tmp_path)
        calls = {key: [load(c) for c in found] for key, found in data["calls"].items()}
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("shapes", None)
    assert calls["area"] == [([2.0, 3.0], {}), ([4.0, 1.0], {}), ([-1.0, 1.0], {}),
                             ([1.0, 2.0], {})]
    assert data["skipped"]["area"] == 1  # the unpicklable height
    assert calls["steps"] == [([3, 9], {"scale": 2})]  # *extra flattened, keyword-only kept
    # a generator is recorded when called, not again each time it resumes
    assert calls["countdown"] == [([3], {}), ([2], {})]
    (box_init,) = calls["Box.__init__"]
    assert box_init[0][1] == 2 and vars(box_init[0][0]) == {}  # self as it was on entry
    grows = calls["Box.grow"]
    assert [(vars(a[0]), a[1]) for a, _ in grows] == [({"side": 2, "log": []}, 1),
                                                     ({"side": 3, "log": [1]}, 2)]
    assert [a[1] for a, _ in calls["Box.volume#1"]] == [27.0]


def test_tracer_keeps_at_most_max_calls_per_function(tmp_path: Path) -> None:
    data = run_traced(tmp_path, max_calls=1)
    assert {k: len(v) for k, v in data["calls"].items()}["area"] == 1


# --- generated inputs -------------------------------------------------------------------------


def b64(value: object) -> str:
    return base64.b64encode(pickle.dumps(value, 4)).decode()


class Marker:
    def __reduce__(self) -> Any:
        return (os.system, ("touch /tmp/repogym-pwned",))


def test_only_plain_data_is_unpickled_on_the_host() -> None:
    assert plain_value(b64({"a": [1, 2.5, (3, "x")], "b": {1, 2}, "c": b"z"})) == \
        (True, {"a": [1, 2.5, (3, "x")], "b": {1, 2}, "c": b"z"})
    assert plain_value(b64(Marker())) == (False, None)  # refused, never run
    assert not os.path.exists("/tmp/repogym-pwned")
    assert plain_value(b64(TraceConfig()))[0] is False


def test_annotations_become_strategies() -> None:
    from hypothesis import strategies as st

    assert annotation_strategy(st, "int | None") is not None
    assert annotation_strategy(st, "Optional[list[str]]") is not None
    assert annotation_strategy(st, "dict[str, tuple[int, ...]]") is not None
    assert annotation_strategy(st, "Box") is None and annotation_strategy(st, "((") is None


def test_generated_calls_mutate_recorded_values_deterministically() -> None:
    (area,) = [t for t in target_functions(SHAPES, REFERENCE) if t.key == "area"]
    recorded = [{"args": [b64(2.0), b64(3.0)], "kwargs": {}}]
    made = generate_calls(recorded, area, 20, seed=1)
    assert made == generate_calls(recorded, area, 20, seed=1)
    assert made != generate_calls(recorded, area, 20, seed=2)
    assert len(made) == 20 and recorded[0] not in made
    values = [load(c)[0] for c in made]
    assert all(len(v) == 2 and all(isinstance(x, float) for x in v) for v in values)
    opaque: dict[str, Any] = {"args": [b64(TraceConfig()), b64("abc")],
                              "kwargs": {"k": b64([1, 2])}}
    for call in generate_calls([opaque], area, 10, seed=0):
        assert call["args"][0] == opaque["args"][0]  # not plain data: kept as recorded
        assert set(call["kwargs"]) == {"k"}


def test_annotations_alone_make_calls_for_a_function_no_test_called() -> None:
    (area,) = [t for t in target_functions(SHAPES, REFERENCE) if t.key == "area"]
    made = generate_calls([], area, 5, seed=0)
    assert len(made) == 5 and all(len(c["args"]) == 1 for c in made)  # the required width
    (grow,) = [t for t in target_functions(SHAPES, REFERENCE) if t.key == "Box.grow"]
    assert generate_calls([], grow, 5, seed=0) == []  # a method needs a recorded self


def test_selection_keeps_traced_cases_and_prefers_new_generated_outcomes() -> None:
    def case(origin: str, expect: list[Any], fn: str = "f") -> dict[str, Any]:
        return {"fn": fn, "origin": origin, "expect": expect}

    valid = [case("trace", ["return", 1]), case("hypothesis", ["return", 1]),
             *[case("hypothesis", ["raise", "builtins.ValueError"]) for _ in range(5)],
             case("hypothesis", ["return", 2]), case("hypothesis", ["return", 3], "g")]
    kept = trace.select_cases(valid, TraceConfig(max_generated=4, max_raising=0.25))
    assert [c["expect"] for c in kept if c["fn"] == "f"] == [
        ["return", 1], ["raise", "builtins.ValueError"], ["return", 2], ["return", 1]]
    assert [c["expect"] for c in kept if c["fn"] == "g"] == [["return", 3]]


# --- in Docker: a module-granularity task -----------------------------------------------------

LEGACY = textwrap.dedent('''\
    """An old copy of Box, as a vendored package would carry it."""


    class OldBox:
        def grow(self, by=1):
            self.side += by
            self.log.append(by)
            return self.side
    ''')


def unified(path: str, before: str, after: str) -> str:
    import difflib

    lines = difflib.unified_diff(before.splitlines(True), after.splitlines(True),
                                 f"a/{path}", f"b/{path}")
    return f"diff --git a/{path} b/{path}\n" + "".join(lines)


@pytest.fixture(scope="module")
def shapes_source(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from repogym.sandbox.client import docker_available
    from repogym.schema import Environment
    from repogym.tasks.sources.common import SourceOptions, WorkRepo
    from repogym.tasks.sources.replication import ReplicationOptions, ReplicationSource

    if not docker_available():
        # CI must prove the real thing ran: there a missing engine fails
        (pytest.fail if os.environ.get("CI") else pytest.skip)("needs a Docker engine")
    works: dict[bool, WorkRepo] = {}

    def repository(legacy: bool) -> WorkRepo:
        if legacy not in works:
            root = tmp_path_factory.mktemp("shapes") / "shapes"
            root.mkdir()
            (root / "shapes.py").write_text(SHAPES)
            (root / "test_shapes.py").write_text(SHAPES_TESTS)
            if legacy:  # a copy of Box.grow the agent could take: every task with it leaks
                (root / "legacy").mkdir()
                (root / "legacy" / "boxes.py").write_text(LEGACY)
            works[legacy] = WorkRepo.create(root, root.parent / "work")
        return works[legacy]

    def source(granularity: str, legacy: bool = False) -> ReplicationSource:
        work = repository(legacy)
        return ReplicationSource(work, ReplicationOptions(work.path, granularity=granularity,
                                                          min_lines=1),
                                 SourceOptions(runs=1), Environment(), log=lambda _m: None)

    return source


@pytest.mark.docker
@pytest.mark.slow
def test_module_task_gives_per_function_partial_credit(shapes_source: Any) -> None:
    from repogym.envs.grading.grader import Grader, GraderConfig
    from repogym.images.repository import ensure_image
    from repogym.tasks.sources.replication import Target, remove_body

    source = shapes_source("module")
    target = next(t for t in source.targets() if t.file == "shapes.py")
    task, reason = source.check(source.materialize(target))
    assert task is not None, reason
    recorded = task.reference["cases"]
    assert set(recorded["functions"]) == {"area", "steps", "countdown", "Box.__init__",
                                          "Box.grow", "Box.volume", "Box.volume#1"}
    assert task.extra["differential"].startswith(f"{len(recorded['cases'])} cases over 7")
    base = remove_body(SHAPES, target)
    half = unified("shapes.py", base, remove_body(SHAPES, Target("shapes.py", "Box", "class")))
    grader = Grader(GraderConfig(cleanup_async=False), seed=0)
    image = ensure_image(task, progress=lambda _m: None).tag
    gold, stub, partial = (grader.grade(task, p, image) for p in (task.patch, "", half))
    assert gold.resolved and gold.differential["agreement"] == 1.0
    assert stub.differential["agreement"] == 0.0
    per = {fn: f["agreement"] for fn, f in partial.differential["functions"].items()}
    assert per == {"area": 1.0, "steps": 1.0, "countdown": 1.0, "Box.__init__": 0.0,
                   "Box.grow": 0.0, "Box.volume": 0.0, "Box.volume#1": 0.0}
    assert partial.differential["agreement"] == round(3 / 7, 4)


@pytest.mark.docker
@pytest.mark.slow
def test_a_copy_the_repository_owns_is_context_not_a_leak(shapes_source: Any) -> None:
    """legacy/boxes.py holds OldBox.grow, the removed Box.grow to the letter: the repository's
    own code is what the agent is meant to read (the leak check looks for copies the
    repository does not own), so the task is kept, and its cases are recorded."""
    source = shapes_source("function", legacy=True)
    target = next(t for t in source.targets() if t.qualname == "Box.grow")
    task, reason = source.check(source.materialize(target))
    assert task is not None, reason
    assert task.reference and task.reference.get("cases"), task.reference


def test_hypothesis_parses_one_thread_at_a_time_with_repogym(monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    """CPython 3.11's ast.parse fails ("AST constructor recursion depth mismatch") when two
    threads convert trees at once: a `tasks add --workers 2` run on more-itertools ended so.
    Hypothesis parses sources on its own while gold cases are generated in one worker and
    candidates are parsed in another: every such parse holds the lock repogym's own parsing
    takes (``repogym.syntax_lock``)."""
    import ast

    from repogym import syntax_lock

    held: list[bool] = []
    parse = ast.parse

    def watched(*args: Any, **kwargs: Any) -> Any:
        held.append(syntax_lock._LOCK._is_owned())  # type: ignore[attr-defined]
        return parse(*args, **kwargs)

    monkeypatch.setattr(ast, "parse", watched)
    (area,) = [t for t in target_functions(SHAPES, REFERENCE) if t.key == "area"]
    recorded = [{"args": [b64(2.0), b64(3.0)], "kwargs": {}}]
    assert generate_calls(recorded, area, 20, seed=1)
    assert held, "hypothesis no longer parses here: this test would show nothing"
    assert all(held), held
