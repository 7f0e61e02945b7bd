"""Differential testing: the canonical encoding and its equality, the harness as a real
process, the scores and rewards built on it, and (in Docker) a replication task made from a
real PyPI sdist whose agreement moves with the candidate's correctness."""

from __future__ import annotations

import base64
import collections
import dataclasses
import json
import math
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from repogym.envs.grading import agreement
from repogym.envs.grading import differential as d
from repogym.envs.grading.grader import GradingReport
from repogym.envs.grading.rewards import REWARDS, components, replication, shaped


def same_values(a: object, b: object) -> bool:
    return d.same(json.loads(json.dumps(d.encode(a))), json.loads(json.dumps(d.encode(b))))


# --- encoding and equality --------------------------------------------------------------------


def test_floats_compare_with_a_relative_tolerance_and_nan_equals_nan() -> None:
    assert same_values(0.1 + 0.2, 0.3)
    assert same_values(1e20, 1e20 * (1 + 1e-12))
    assert not same_values(1.0, 1.0 + 1e-6)
    assert same_values(float("nan"), float("nan"))
    assert not same_values(float("nan"), 0.0)
    assert same_values(float("inf"), float("inf")) and not same_values(float("inf"), 1e308)
    assert same_values(2, 2.0)  # ints and floats compare as numbers...
    assert not same_values(True, 1) and not same_values(0, False)  # ...bools do not
    assert same_values(10**30, 10**30) and not same_values(10**30, 10**30 + 1)


def test_sequences_keep_order_sets_and_dict_keys_do_not() -> None:
    assert same_values([1, 2.0000000000001], [1, 2.0])
    assert not same_values([1, 2], [2, 1])
    assert not same_values((1, 2), [1, 2])
    assert same_values({3, 1, 2}, {2, 3, 1}) and not same_values({1, 2}, {1, 2, 3})
    assert same_values(frozenset("ab"), frozenset("ba")) and same_values({1}, frozenset({1}))
    assert same_values({"b": 0.1 + 0.2, "a": [1]}, {"a": [1], "b": 0.3})
    assert not same_values({"a": 1}, {"b": 1}) and not same_values({"a": 1}, {"a": 2})
    assert not same_values({"a": 1}, collections.OrderedDict(a=1))  # the type counts


class AlwaysEqual:
    def __init__(self, value: object) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = object.__hash__


class Other(AlwaysEqual):
    pass


@dataclasses.dataclass
class Point:
    x: float
    y: float


class Slotted:
    __slots__ = ("a", "b")

    def __init__(self, a: int) -> None:
        self.a = a


def test_objects_by_type_and_state_never_their_own_eq() -> None:
    assert same_values(AlwaysEqual(1), AlwaysEqual(1))
    assert not same_values(AlwaysEqual(1), AlwaysEqual(2))  # __eq__ says True; state differs
    assert not same_values(AlwaysEqual(1), Other(1))
    assert same_values(Point(0.1 + 0.2, 1), Point(0.3, 1.0))
    assert same_values(Slotted(1), Slotted(1)) and not same_values(Slotted(1), Slotted(2))
    loop: list[Any] = [1]
    loop.append(loop)
    assert d.encode(loop) == ["list", None, 1, ["cycle"]]
    deep: list[Any] = []
    for _ in range(d.MAX_DEPTH + 5):
        deep = [deep]
    assert "deep" in json.dumps(d.encode(deep))


def test_values_iterators_long_strings_and_exceptions() -> None:
    def gen() -> Any:
        yield 1
        yield 2
        raise KeyError("x")

    assert d.encode(gen()) == ["iter", 1, 2, ["raise", "builtins.KeyError"]]
    assert same_values(iter([1, 2]), (x for x in [1, 2]))  # by what they yield
    endless = d.encode(iter(int, 1))
    assert len(endless) == d.MAX_ITEMS + 2 and endless[-1] == ["more"]
    long = "x" * (d.MAX_STR + 1)
    assert d.encode(long)[0] == "strh" and same_values(long, "x" * (d.MAX_STR + 1))
    assert not same_values(long, "x" * (d.MAX_STR + 2))
    import decimal
    import enum

    class Color(enum.Enum):
        RED = 1

    assert same_values(decimal.Decimal("1.10"), decimal.Decimal("1.10"))
    assert not same_values(decimal.Decimal("1.1"), 1.1)
    assert d.encode(Color.RED)[2] == "RED"
    assert same_values(ValueError("a"), ValueError("a")) and not same_values(
        ValueError("a"), TypeError("a"))


def test_call_outcomes_hold_mutated_arguments_and_exception_types_only() -> None:
    def push(items: list[int], x: int) -> None:
        items.append(x)

    def fail(message: str) -> None:
        raise ValueError(message)

    assert d.call_one(push, [[1], 2], {}) == ["return", None, ["list", None, ["list", None, 1, 2]]]
    assert d.call_one(fail, ["a"], {}) == d.call_one(fail, ["b"], {}) == \
        ["raise", "builtins.ValueError"]
    assert d.call_one(len, ["abc"], {}) == ["return", 3]  # immutable arguments are left out


# --- the harness as a process -----------------------------------------------------------------

MODULE = '''\
import sys

def upper(s):
    print("noise that must not break the results", s)
    sys.stderr.write("more noise\\n")
    return s.upper()

def spin(n):
    while True:
        try:
            while True:
                pass
        except BaseException:
            pass  # swallows the alarm: the harness must still move on

def half(x):
    return x / 2
'''


def b64(value: object) -> str:
    return base64.b64encode(pickle.dumps(value, 4)).decode()


def run_harness(folder: Path, source: str, calls: list[tuple[str, list[Any]]],
                functions: dict[str, dict[str, str]] | None = None, timeout: float = 0.5
                ) -> list[Any]:
    (folder / "mod.py").write_text(source)
    functions = functions or {n: {"module": "mod", "qualname": n, "role": "call"}
                              for n in ("upper", "spin", "half", "gone")}
    inputs = {"functions": functions, "call_timeout": timeout,
              "cases": [{"id": str(i), "fn": fn, "args": [b64(a) for a in args], "kwargs": {}}
                        for i, (fn, args) in enumerate(calls)]}
    (folder / "inputs.json").write_text(json.dumps(inputs))
    proc = subprocess.run([sys.executable, d.__file__, str(folder / "inputs.json")], cwd=folder,
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONHASHSEED": "0"})
    found = agreement.parse_outcomes(proc.stdout)
    return [found[str(i)][0] if str(i) in found else None for i in range(len(calls))]


def test_harness_survives_noise_hangs_and_missing_functions(tmp_path: Path) -> None:
    outcomes = run_harness(tmp_path, MODULE, [("upper", ["ab"]), ("spin", [1]), ("half", [3]),
                                              ("gone", [1]), ("half", ["x"])])
    assert outcomes == [["return", "AB"], ["timeout"], ["return", 1.5],
                        ["error", "resolve: builtins.AttributeError"],
                        ["raise", "builtins.TypeError"]]


def test_harness_a_module_that_does_not_import_fails_every_case(tmp_path: Path) -> None:
    outcomes = run_harness(tmp_path, "raise ImportError('broken')\n", [("half", [2])] * 2)
    assert outcomes == [["error", "resolve: builtins.ImportError"]] * 2


def test_harness_times_the_call_not_the_import_that_comes_with_it(tmp_path: Path) -> None:
    # a slow import is no slow call: recording drops cases slower than slow_call, and a
    # function's first case used to carry its module's import (toolz under load: 0.34 s);
    # the call is timed in CPU seconds, so a busy machine does not make it slow either
    (tmp_path / "inputs.json").write_text(json.dumps({
        "functions": {"half": {"module": "mod", "qualname": "half", "role": "call"}},
        "call_timeout": 2.0,
        "cases": [{"id": "0", "fn": "half", "args": [b64(4)], "kwargs": {}}]}))
    (tmp_path / "mod.py").write_text("import time\ntime.sleep(0.6)\n" + MODULE)
    proc = subprocess.run([sys.executable, d.__file__, str(tmp_path / "inputs.json")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    outcome, seconds = agreement.parse_outcomes(proc.stdout)["0"]
    assert outcome == ["return", 2.0] and seconds < 0.5


def test_result_lines_printed_twice_count_as_errors() -> None:
    line = d.MARK + json.dumps({"id": "0", "out": ["return", 1], "s": 0.0})
    found = agreement.parse_outcomes(f"{line}\nnoise\n{line}\n" + d.MARK + "not json\n")
    assert found == {"0": (["error", "duplicate"], 0.0)}


def test_score_averages_functions_so_each_removed_function_counts_the_same() -> None:
    cases = [{"fn": "f", "expect": ["return", 1]}] * 3 + [{"fn": "g", "expect": ["return", 2]}]
    outcomes = {"0": (["return", 1], 0.0), "1": (["return", 0], 0.0), "3": (["timeout"], 0.0)}
    result = agreement.score(cases, outcomes)
    assert result["functions"]["f"] == {"agreement": 0.3333, "agreed": 1, "cases": 3}
    assert result["functions"]["g"]["agreement"] == 0.0
    assert result["agreement"] == round(1 / 6, 4)
    assert result["missing"] == 1 and result["timeouts"] == 1


# --- rewards ----------------------------------------------------------------------------------


def report_with(agreement: float | None, f2p: float, resolved: bool = False) -> GradingReport:
    report = GradingReport("t", resolved=resolved, patch_applied=True, empty_patch=False,
                           compiles=True, f2p_pass_rate=f2p, p2p_pass_rate=1.0)
    if agreement is not None:
        report.differential = {"agreement": agreement, "functions": {}}
    return report


def test_replication_reward_is_dense_and_shaped_uses_agreement() -> None:
    assert "replication" in REWARDS
    ref = components(report_with(1.0, 1.0, resolved=True), 3, None)
    stub = components(report_with(0.0, 0.0), 3, None)
    partial = components(report_with(0.5, 0.0), 3, None)
    assert ref["agreement"] == 1.0 and partial["agreement"] == 0.5
    assert replication(ref) == 1.0 and replication(stub) == 0.0
    assert 0.0 < replication(partial) < 1.0
    assert shaped(partial) > shaped(stub)
    assert shaped(ref) == pytest.approx(1.0)
    plain = components(report_with(None, 0.5), 3, None)
    assert "agreement" not in plain
    assert replication(plain) == pytest.approx(0.5)  # falls back to the tests
    assert shaped(plain) == pytest.approx(0.2 + 0.25)
    invalid = {**partial, "invalid": 1.0}
    assert replication(invalid) == 0.0
    assert math.isclose(replication({**invalid, "tests_tampered": 2.0}), -0.2)


# --- in Docker: a replication task made from a real PyPI sdist ----------------------------------
# toolz 0.12.1: a small pure-Python sdist that ships its tests. The task removes
# ``partition_all`` (a generator); its cases are traced from the repository's own tests and
# mutated with hypothesis when the task is made, exactly as ``repogym tasks add pypi`` does.

REQUIREMENT = "toolz==0.12.1"
FILE = "toolz/itertoolz.py"
STUB = "    raise NotImplementedError\n"
NEEDLE = "zip_longest(*args, fillvalue=no_pad)"  # removed code, found nowhere else in the sdist
SEARCH = '''

def _find_reference():
    """Looks for the removed ``partition_all`` in every module, every folder on the import
    path, the repository, the home folders and the scratch folders."""
    import itertools
    import os
    import sys

    needle, head = "zip_longest(*args, " + "fillvalue=no_pad)", "def " + "partition_all("

    def works(fn):
        try:
            return list(fn(2, [1, 2, 3])) == [(1, 2), (3,)]
        except Exception:
            return False

    for module in list(sys.modules.values()):
        found = getattr(module, "partition_all", None)
        if callable(found) and getattr(module, "__name__", "") != __name__ and works(found):
            return found
    roots = ["/testbed", "/opt", "/home", "/root", "/tmp", "/var/tmp", "/srv", "/mnt", *sys.path]
    for top in roots:
        for root, _, files in os.walk(top):
            for name in files:
                try:
                    with open(os.path.join(root, name), "rb") as f:
                        text = f.read(1 << 20).decode("utf-8", "ignore")
                except OSError:
                    continue
                if needle not in text or head not in text:
                    continue
                lines = text[text.index(head):].splitlines()
                body = itertools.takewhile(lambda x: not x or x[0].isspace(), lines[1:])
                space = dict(globals())
                try:
                    exec("\\n".join([lines[0], *body]), space)
                except Exception:
                    continue
                if works(space.get("partition_all")):
                    return space["partition_all"]
    return None


_FOUND = _find_reference()
'''


@pytest.fixture(scope="module")
def toolz_task(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from repogym.errors import TaskError
    from repogym.sandbox.client import docker_available
    from repogym.tasks.sources.common import SourceOptions
    from repogym.tasks.sources.pypi import PypiOptions, PypiSource

    if not docker_available():
        # CI must prove the real thing ran: there a missing engine fails
        (pytest.fail if os.environ.get("CI") else pytest.skip)("needs a Docker engine")
    try:
        source = PypiSource(PypiOptions(REQUIREMENT, kinds=("replication",)),
                            SourceOptions(runs=1), tmp_path_factory.mktemp("pypi") / "work",
                            log=lambda _m: None)
    except TaskError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"needs PyPI to fetch {REQUIREMENT}: {exc}")
    replication = source.sources["replication"]
    target = next(t for t in replication.targets() if t.qualname == "partition_all")
    task, reason = replication.check(replication.materialize(target))
    assert task is not None, reason
    return task


def candidate(task: Any, body: str, tail: str = "", extra: dict[str, str] | None = None) -> str:
    """A patch that gives ``partition_all`` ``body`` (and appends ``tail`` to the
    module)."""
    import difflib
    import tempfile

    from repogym.repo import export_tree

    with tempfile.TemporaryDirectory() as tmp:
        export_tree(task.source, task.base_commit, Path(tmp) / "t")
        old = (Path(tmp) / "t" / FILE).read_text()
    assert old.count(STUB) == 1
    files = {FILE: (old, old.replace(STUB, textwrap_indent(body)) + tail)}
    files.update({path: ("", text.rstrip("\n") + "\n") for path, text in (extra or {}).items()})
    out = []
    for path, (before, after) in files.items():
        diff = difflib.unified_diff(before.splitlines(True), after.splitlines(True),
                                    "/dev/null" if not before else f"a/{path}", f"b/{path}")
        mode = "new file mode 100644\n" if not before else ""
        out.append(f"diff --git a/{path} b/{path}\n{mode}" + "".join(diff))
    return "".join(out)


def textwrap_indent(body: str) -> str:
    return "".join(f"    {line}\n" for line in body.strip("\n").splitlines())


HACK = '''\
if _FOUND is None:
    raise NotImplementedError
yield from _FOUND(n, seq)
'''
REWRITTEN = '''\
if n <= 0:
    return
it = iter(seq)
while True:
    chunk = tuple(itertools.islice(it, n))
    if not chunk:
        return
    yield chunk
'''


@pytest.fixture(scope="module")
def graded(toolz_task: Any) -> dict[str, Any]:
    from repogym.envs.grading.grader import Grader, GraderConfig
    from repogym.images.repository import ensure_image

    grader = Grader(GraderConfig(cleanup_async=False), seed=0)
    image = ensure_image(toolz_task, progress=lambda _m: None).tag
    patches = {
        "gold": toolz_task.patch,
        "rewritten": candidate(toolz_task, REWRITTEN),
        "stub": "",
        "drops_short_tail": candidate(toolz_task, REWRITTEN.replace(
            "if not chunk:", "if len(chunk) < n:")),
        "lists_not_tuples": candidate(toolz_task, REWRITTEN.replace("tuple(", "list(")),
        "hack": candidate(toolz_task, HACK, SEARCH),
        "hack_with_planted_reference": candidate(toolz_task, HACK, SEARCH,
            {"toolz/notes.txt": toolz_task.reference["source"]}),
    }
    return {name: grader.grade(toolz_task, patch, image) for name, patch in patches.items()}


@pytest.mark.docker
@pytest.mark.slow
def test_cases_come_from_the_tests_and_from_hypothesis(toolz_task: Any) -> None:
    recorded = toolz_task.reference["cases"]
    assert list(recorded["functions"]) == ["partition_all"]
    origins = [c["origin"] for c in recorded["cases"]]
    assert origins.count("trace") >= 3 and origins.count("hypothesis") >= 20
    inputs = [[pickle.loads(base64.b64decode(a)) for a in c["args"]] for c in recorded["cases"]
              if c["origin"] == "trace"]
    assert [2, [1, 2, 3, 4]] in inputs  # as the tests call it
    assert all(c["expect"][0] in ("return", "raise") for c in recorded["cases"])


@pytest.mark.docker
@pytest.mark.slow
def test_agreement_moves_with_correctness(graded: dict[str, Any]) -> None:
    agreement = {name: r.differential["agreement"] for name, r in graded.items()}
    print("\nagreement:", agreement, "\ndifferential seconds:",
          {n: r.differential["seconds"] for n, r in graded.items()},
          "\ngrading seconds:", {n: round(r.total_seconds, 2) for n, r in graded.items()})
    assert agreement["gold"] == agreement["rewritten"] == 1.0
    assert graded["gold"].resolved and not graded["stub"].resolved
    assert agreement["stub"] == 0.0
    assert 0.0 < agreement["drops_short_tail"] < 1.0
    assert 0.0 < agreement["lists_not_tuples"] < 1.0
    assert graded["drops_short_tail"].differential["functions"]["partition_all"]["cases"] == \
        graded["gold"].differential["cases"]
    # differential testing adds seconds, not minutes (the hacks below walk the disk on import)
    assert all(r.differential["seconds"] < 5.0 for n, r in graded.items() if "hack" not in n)


@pytest.mark.docker
@pytest.mark.slow
def test_a_candidate_that_hunts_for_the_reference_finds_nothing(
        graded: dict[str, Any]) -> None:
    # the same search finds the reference when it is on disk (here: planted by the patch)...
    assert graded["hack_with_planted_reference"].differential["agreement"] == 1.0
    # ...and nothing in the grading container otherwise: it scores what a stub scores
    assert graded["hack"].differential["agreement"] == 0.0
    assert not graded["hack"].resolved


@pytest.mark.docker
@pytest.mark.slow
def test_the_agents_container_holds_no_reference_and_no_case(toolz_task: Any) -> None:
    from repogym.images.repository import ensure_image
    from repogym.sandbox.base import SandboxConfig
    from repogym.sandbox.docker import DockerSandbox

    image = ensure_image(toolz_task, progress=lambda _m: None).tag
    # what a leaked cases file would hold: the base64 of a generated input
    generated = [c["args"][0] for c in toolz_task.reference["cases"]["cases"]
                 if c["origin"] == "hypothesis"]
    with DockerSandbox(SandboxConfig(image=image, shell=False,
                                     cap_add=("DAC_OVERRIDE", "DAC_READ_SEARCH"))) as box:
        def grep(text: str) -> list[str]:
            found = box.exec(["grep", "-rlIFs", "--exclude-dir=proc", "--exclude-dir=sys",
                              "--exclude-dir=dev", "--", text, "/"], user="root", timeout=300)
            return found.output.split()

        assert "/testbed/" + FILE in grep("def partition_all(")  # the search itself works
        for text in [NEEDLE, generated[0]]:
            assert grep(text) == [], f"{text!r} is in the agent's container"


@pytest.mark.docker
@pytest.mark.slow
def test_env_reports_agreement_with_the_replication_reward(toolz_task: Any) -> None:
    import gymnasium as gym

    import repogym  # noqa: F401  (registers the environment)

    env = gym.make("repogym/SWE-v0", tasks=[toolz_task], reward="replication")
    try:
        env.reset(seed=0)
        env.step({"tool": "str_replace", "path": FILE, "old_str": STUB,
                  "new_str": textwrap_indent(REWRITTEN.replace("tuple(", "list("))})
        _, reward, terminated, _, info = env.step({"tool": "submit"})
    finally:
        env.close()
    comps = info["reward_components"]
    assert terminated and 0.0 < comps["agreement"] < 1.0
    assert info["grading"]["differential"]["functions"]["partition_all"]["agreement"] == \
        comps["agreement"]
    assert reward == pytest.approx(replication(comps))
    assert {"resolved", "f2p_pass_rate", "p2p_pass_rate", "similarity"} <= set(comps)
