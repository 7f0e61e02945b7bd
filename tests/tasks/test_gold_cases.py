"""Gold cases without Docker: the functions a patch changes, the boundary tracer in a real
traced pytest process, naming what it saw, sorting inputs into discriminating and regression
cases, scoring them, and the dense reward."""

from __future__ import annotations

import base64
import json
import os
import pickle
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from gold_toy import CORE, GOLD, HIDDEN_TESTS, SLOW_TESTS, unified, write_repo

from repogym.envs.grading.agreement import score_gold
from repogym.envs.grading.rewards import dense
from repogym.tasks.sources import boundary, trace
from repogym.tasks.sources.enrich import SITECUSTOMIZE, EnrichConfig, classify, ranked, select
from repogym.tasks.sources.gold_targets import (
    Traced,
    changed_functions,
    name_traced,
    patch_paths,
    places,
)

PATCH = unified("inv/core.py", CORE, GOLD)


# --- the patch's functions --------------------------------------------------------------------


def test_changed_functions_come_from_the_hunks_and_the_ast() -> None:
    test_patch = unified("tests/test_fix.py", "", HIDDEN_TESTS)
    assert patch_paths(PATCH + test_patch) == ["inv/core.py"]
    found = changed_functions(PATCH, {"inv/core.py": CORE}, {"inv/core.py": GOLD})
    assert found == {"inv/core.py": ["Stock.add", "_clean"]}
    # an added function counts, a removed line counts for the function that held it, a
    # change outside any function (a constant) names none
    after = GOLD.replace("class Stock:", "LIMIT = 3\n\n\ndef parse_all(texts):\n"
                         "    return [parse_qty(t) for t in texts]\n\n\nclass Stock:")
    after = after.replace('    if not cleaned:\n        raise ValueError("empty quantity")\n', "")
    assert "empty quantity" not in after
    found = changed_functions(unified("inv/core.py", CORE, after), {"inv/core.py": CORE},
                              {"inv/core.py": after})
    assert found == {"inv/core.py": ["Stock.add", "_clean", "parse_all", "parse_qty"]}
    # a decorated function's code starts on its decorator's line
    [total] = places({"inv/core.py": GOLD}, {"inv/core.py": ["total_of"]})
    assert total.name == "total_of" and len(total.lines) == 2


# --- the tracer in a real process -------------------------------------------------------------


def run_traced(folder: Path, targets: list[Any], budget: float = 0.0, timeout: float = 300,
               more: dict[str, str] | None = None) -> dict[str, Any]:
    """The toy's tests on the gold code under the tracer, loaded as the container loads it
    (``more``: test files besides the toy's)."""
    write_repo(folder)
    (folder / "inv" / "core.py").write_text(GOLD)
    (folder / "tests" / "test_fix.py").write_text(HIDDEN_TESTS)
    for name, text in (more or {}).items():
        (folder / "tests" / name).write_text(text)
    hook = folder.parent / "hook"
    hook.mkdir()
    shutil.copy(boundary.__file__, hook / "repogym_boundary.py")
    shutil.copy(trace.__file__, hook / "repogym_trace.py")
    (hook / "sitecustomize.py").write_text(SITECUSTOMIZE)
    out = folder.parent / "out"
    out.mkdir()
    config = {"root": str(folder), "out": str(out), "max_calls": 50, "max_bytes": 4096,
              "max_functions": 40, "budget": budget,
              "targets": [{"path": str(folder / p.path), "name": p.name, "lines": list(p.lines)}
                          for p in targets]}
    (hook / "config.json").write_text(json.dumps(config))
    env = {**os.environ, "PYTHONPATH": str(hook), "REPOGYM_TRACE": str(hook / "config.json"),
           "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "tests"], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-2000:]
    [dump] = list(out.glob("gold-*.json"))
    return dict(json.loads(dump.read_text()))


def load(call: dict[str, Any]) -> list[Any]:
    return [pickle.loads(base64.b64decode(a)) for a in call["args"]]


def test_tracer_records_boundary_calls_and_the_patch_functions(tmp_path: Path) -> None:
    repo = tmp_path / "inv"
    targets = places({"inv/core.py": GOLD}, {"inv/core.py": ["_clean", "Stock.add"]})
    data = run_traced(repo, targets)
    seen = {info["name"]: info for info in data["functions"].values()}
    # what the tests call, through the decorator's wrapper too; the patch's helper, although
    # only parse_qty calls it; never the wrapper itself, nor remove's callers' internals
    assert set(seen) == {"parse_qty", "__init__", "add", "remove", "total_of", "_clean"}
    assert seen["_clean"]["from_tests"] == 0 and seen["parse_qty"]["from_tests"] > 0
    assert seen["total_of"]["from_tests"] == 1 and seen["parse_qty"]["module"] == "inv.core"
    # which tests called: the functions a FAIL_TO_PASS test calls are tried first
    assert seen["total_of"]["tests"] == ["test_total"]
    assert set(seen["parse_qty"]["tests"]) == {"test_plain", "test_empty", "test_separators"}
    texts = {"inv/core.py": GOLD}
    sys.path.insert(0, str(repo))  # to unpickle the toy's Stock here
    try:
        traced = {t.key: t for t in name_traced(data["functions"], data["calls"], texts)}
        assert set(traced) == {"inv.core:parse_qty", "inv.core:Stock.__init__",
                               "inv.core:Stock.add", "inv.core:Stock.remove",
                               "inv.core:total_of", "inv.core:_clean"}
        parsed = sorted(load(c)[0] for c in traced["inv.core:parse_qty"].calls)
        assert parsed == ["  ", " 12 ", " 3,000 ", "1,200", "12"]
        adds = [(vars(a[0]), a[1], a[2]) for a in map(load, traced["inv.core:Stock.add"].calls)]
        assert ({"items": {}}, " Bolt ", 2) in adds  # self as it was on entry
        assert ({"items": {"bolt": 2}}, "bolt", 1) in adds
        assert traced["inv.core:total_of"].target.params == ("stock",)
    finally:
        sys.path.remove(str(repo))
        for name in [m for m in sys.modules if m == "inv" or m.startswith("inv.")]:
            sys.modules.pop(name)


def test_the_traced_run_ends_at_its_time_budget_with_what_it_saw(tmp_path: Path) -> None:
    """A test that calls the package millions of times (more-itertools' prime-number tests:
    125 s under the tracer) costs the recording no more than its budget: the tracer writes what
    it saw and ends the run, saying so."""
    targets = places({"inv/core.py": GOLD}, {"inv/core.py": ["_clean"]})
    start = time.monotonic()
    data = run_traced(tmp_path / "inv", targets, budget=2.0, timeout=120,
                      more={"test_slow.py": SLOW_TESTS})
    assert time.monotonic() - start < 60  # the loop alone runs 600 s
    assert data["stopped"] == "budget"
    seen = {info["name"]: info for info in data["functions"].values()}
    assert "test_a_million_calls" in seen["parse_qty"]["tests"]
    assert any(load(c) == ["7"] for c in data["calls"][next(
        k for k, info in data["functions"].items() if info["name"] == "parse_qty")])


# --- sorting and keeping ----------------------------------------------------------------------


def outcome(value: Any, seconds: float = 0.01) -> tuple[Any, float]:
    return (["return", value], seconds)


def test_inputs_are_sorted_by_what_gold_and_base_do() -> None:
    cases = [{"fn": "m:f", "args": [], "kwargs": {}, "origin": "trace"} for _ in range(6)]
    gold = [{"0": outcome(1), "1": outcome(1), "2": outcome(1), "3": outcome(1),
             "4": outcome(1, 0.5), "5": outcome(1)}] * 2
    gold = [gold[0], {**gold[0], "2": outcome(2)}]  # case 2: gold is not deterministic
    base = [{"0": outcome(0), "1": outcome(1), "2": outcome(1), "3": outcome(0),
             "4": outcome(0), "5": (["timeout"], 0.4)}, {}]
    base[1] = {**base[0], "3": outcome(3)}  # case 3: base is not deterministic
    kept = classify(cases, gold, base, slow_call=0.2)
    # case 4 is too slow on gold; a base that times out both times is settled
    assert [(c["set"], c["expect"]) for c in kept] == [
        ("discriminating", ["return", 1]), ("regression", ["return", 1]),
        ("discriminating", ["return", 1])]


def traced(key: str, from_tests: int, tests: tuple[str, ...] = ()) -> Traced:
    from repogym.tasks.sources.targets import TargetFunction

    target = TargetFunction(key=key, module="m", qualname=key.split(":")[1], role="call",
                            lines=(1,))
    return Traced(key, target, from_tests, [], ("m.py", 1, key), tests)


def test_functions_a_failing_test_calls_come_first_then_the_patchs() -> None:
    from repogym.schema import Task

    task = Task(instance_id="t", repo="r", base_commit="c", problem_statement="p",
                FAIL_TO_PASS=("tests/test_a.py::TestA::test_new[x-1]",))
    fns = [traced("m:other", 2, ("test_old",)), traced("m:helper", 0),
           traced("m:api", 1, ("test_old", "test_new"))]
    patch_keys = {("m.py", 1, "m:helper")}
    assert [t.key for t in ranked(fns, patch_keys, task, 3)] == ["m:api", "m:helper", "m:other"]
    assert [t.key for t in ranked(fns, patch_keys, task, 1)] == ["m:api"]


def test_cases_are_kept_on_the_boundary_else_on_the_patch_functions() -> None:
    fns = [traced("m:api", 3), traced("m:helper", 0)]

    def case(fn: str, kind: str, origin: str = "trace") -> dict[str, Any]:
        return {"fn": fn, "args": [], "kwargs": {}, "origin": origin, "set": kind,
                "expect": ["return", 1]}

    kept = [case("m:api", "discriminating"), case("m:api", "regression"),
            case("m:helper", "discriminating"), case("m:helper", "regression")]
    chosen = select(kept, fns, {"m:helper"}, EnrichConfig())
    assert chosen is not None and chosen["scope"] == "boundary"
    assert {(c["fn"], c["set"]) for c in chosen["cases"]} == {("m:api", "discriminating"),
                                                              ("m:api", "regression")}
    # the tests' calls tell nothing apart: the patch's own functions then
    chosen = select(kept[1:], fns, {"m:helper"}, EnrichConfig())
    assert chosen is not None and chosen["scope"] == "patch"
    assert list(chosen["functions"]) == ["m:helper"]
    assert select([kept[1], kept[3]], fns, {"m:helper"}, EnrichConfig()) is None
    # regressions: mostly on the functions with discriminating inputs
    more = [case("m:other", "regression") for _ in range(40)] + \
        [case("m:api", "regression") for _ in range(40)]
    chosen = select(kept[:1] + more, [*fns, traced("m:other", 1)], set(),
                    EnrichConfig(max_regression=30))
    assert chosen is not None
    sets = [(c["fn"], c["set"]) for c in chosen["cases"]]
    assert sets.count(("m:api", "regression")) == 20 and sets.count(("m:other", "regression")) == 10
    # caps: per function, traced inputs first
    many = [case("m:api", "discriminating", o) for o in ["hypothesis"] * 30 + ["trace"] * 5]
    chosen = select(many, fns, set(), EnrichConfig(max_per_function=10))
    assert chosen is not None and len(chosen["cases"]) == 10
    assert sum(c["origin"] == "trace" for c in chosen["cases"]) == 5


def test_enrich_config_says_what_to_change() -> None:
    with pytest.raises(ValueError, match="slow_call"):
        EnrichConfig(slow_call=3.0)
    with pytest.raises(ValueError, match="max_per_function"):
        EnrichConfig(max_per_function=0)


# --- scores and the dense reward --------------------------------------------------------------


def test_agreement_is_the_share_of_discriminating_cases_regressions_apart() -> None:
    cases = [{"fn": "m:f", "set": "discriminating", "expect": ["return", 1]},
             {"fn": "m:g", "set": "discriminating", "expect": ["return", 2]},
             {"fn": "m:g", "set": "discriminating", "expect": ["raise", "builtins.KeyError"]},
             {"fn": "m:f", "set": "regression", "expect": ["return", 0]}]
    got = {"0": (["return", 1], 0.0), "1": (["return", 2.0000000001], 0.0),
           "2": (["raise", "builtins.ValueError"], 0.0), "3": (["timeout"], 2.0)}
    scored = score_gold(cases, got)
    assert scored["agreement"] == round(2 / 3, 4) and scored["regression_agreement"] == 0.0
    assert scored["functions"]["m:g"] == {"agreement": 0.5, "agreed": 1, "cases": 2}
    assert scored["timeouts"] == 1 and scored["missing"] == 0
    assert score_gold(cases[3:], {})["agreement"] is None


def comps(**kw: float) -> dict[str, float]:
    base = {"resolved": 0.0, "f2p_pass_rate": 0.0, "p2p_pass_rate": 1.0, "patch_applied": 1.0,
            "compiles": 1.0, "tests_tampered": 0.0, "invalid": 0.0, "n_steps": 3.0}
    return {**base, **kw}


def test_dense_reward_gold_one_empty_zero_partial_between() -> None:
    assert dense(comps(f2p_pass_rate=1.0, agreement=1.0, regression_agreement=1.0)) == 1.0
    assert dense(comps(agreement=0.0, regression_agreement=1.0, patch_applied=0.0)) == 0.0
    partial = dense(comps(f2p_pass_rate=0.5, agreement=0.7, regression_agreement=1.0))
    assert partial == pytest.approx(0.6)
    assert dense(comps(f2p_pass_rate=0.5, agreement=0.7, regression_agreement=0.5)) == \
        pytest.approx(0.5)
    # without cases: agreement falls back to the tests
    assert dense(comps(f2p_pass_rate=0.5)) == pytest.approx(0.5)
    assert dense(comps(f2p_pass_rate=1.0, agreement=1.0, invalid=1.0,
                       tests_tampered=2.0)) == pytest.approx(-0.2)


# --- cases at task creation -------------------------------------------------------------------


def test_tasks_add_records_gold_cases_for_the_tasks_it_keeps() -> None:
    from repogym.schema import Task
    from repogym.tasks.sources.enrich import WithGoldCases

    made = Task(instance_id="t", repo="r", base_commit="c", problem_statement="p",
                patch=PATCH, FAIL_TO_PASS=("tests/test_fix.py::test_x",))
    rejected = made.with_(instance_id="rejected")

    class Source:
        name = "fake"

        def candidates(self) -> list[Task]:
            return [made, rejected]

        def check(self, task: Task) -> tuple[Task | None, str]:
            return (None, "no") if task is rejected else (task, "ok")

    seen: list[str] = []

    def record(task: Task) -> tuple[Task, str]:
        seen.append(task.instance_id)
        return task.with_(extra={"gold_cases": {"cases": [1]}}), "1 case"

    logged: list[str] = []
    source = WithGoldCases(Source(), record, logged.append)
    assert source.name == "fake" and source.candidates() == [made, rejected]
    done, reason = source.check(made)
    assert done is not None and done.extra["gold_cases"] == {"cases": [1]} and reason == "ok"
    assert source.check(rejected) == (None, "no")
    # a task no case can be traced for (here: no pytest) is kept as it is
    other = made.with_(environment=made.environment.__class__(log_parser="django"))
    assert source.check(other) == (other, "ok")
    assert seen == ["t"] and logged == ["t: 1 case"]


def test_the_tracer_runs_the_failing_tests_with_their_siblings_only() -> None:
    """more-itertools: a sample of any passing tests of the failing tests' file drew its
    slowest (the primes), and tracing took two minutes. Siblings only: the failing test's
    class, or its function's other cases."""
    from repogym.schema import Task
    from repogym.tasks.sources.enrich import EnrichConfig, _GoldRecording

    task = Task(instance_id="t", repo="r", base_commit="c", problem_statement="p",
                FAIL_TO_PASS=("tests/test_more.py::OneTests::test_too_long",
                              "tests/test_more.py::test_split[a-b]"),
                PASS_TO_PASS=("tests/test_more.py::OneTests::test_basic",
                              "tests/test_more.py::OneTests::test_short[2]",
                              "tests/test_more.py::test_split[c-d]",
                              "tests/test_more.py::PrimeTests::test_primes",
                              "tests/test_more.py::test_splitting",
                              "tests/test_other.py::OneTests::test_basic"))
    ids = _GoldRecording(None, task, EnrichConfig()).traced_ids()
    assert ids == [[*task.FAIL_TO_PASS, "tests/test_more.py::OneTests::test_basic",
                    "tests/test_more.py::OneTests::test_short[2]",
                    "tests/test_more.py::test_split[c-d]"], list(task.FAIL_TO_PASS)]
    assert _GoldRecording(None, task, EnrichConfig(neighbours=0)).traced_ids() == [
        list(task.FAIL_TO_PASS)]
    # ids pytest cannot be given: the files
    spaced = task.with_(FAIL_TO_PASS=("tests/test_more.py::test_split[a b]",))
    assert _GoldRecording(None, spaced, EnrichConfig()).traced_ids() == []


def test_files_read_in_a_container_are_told_from_what_else_it_prints(tmp_path: Path) -> None:
    """A line the shell prints on the same stream (a locale warning) was taken for a file's
    content and ended the candidate as "unexpected Error: Incorrect padding"."""
    from repogym.errors import SandboxError
    from repogym.schema import Task
    from repogym.tasks.sources.enrich import EnrichConfig, _GoldRecording

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n")

    class Box:
        """Runs the script in bash here, on a copy of /testbed, with a warning first."""

        def __init__(self, noise: str) -> None:
            self.noise = noise

        def exec(self, argv: list[str], **_kw: Any) -> Any:
            script = argv[-1].replace("/testbed", str(tmp_path))
            done = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
            return type("Done", (), {"output": self.noise + done.stdout})()

    task = Task(instance_id="t", repo="r", base_commit="c", problem_statement="p")
    warning = "bash: warning: setlocale: LC_ALL: cannot change locale (C.UTF-8)\n"
    texts = _GoldRecording(Box(warning), task, EnrichConfig()).read(["pkg/a.py", "pkg/b.py"])
    assert texts == {"pkg/a.py": "x = 1\n", "pkg/b.py": None}

    class Garbled(Box):
        def exec(self, argv: list[str], **_kw: Any) -> Any:
            return type("Done", (), {"output": "REPOGYM-FILE 0 not*base64\n"})()

    with pytest.raises(SandboxError, match="pkg/a.py.*not.base64"):  # with what came back
        _GoldRecording(Garbled(""), task, EnrichConfig()).read(["pkg/a.py"])
    class Cut(Box):
        def exec(self, argv: list[str], **_kw: Any) -> Any:
            return type("Done", (), {"output": "REPOGYM-FILE 0 eCA9IDEK\n"})()

    with pytest.raises(SandboxError, match="pkg/b.py.*no line for it"):  # cut short: said
        _GoldRecording(Cut(""), task, EnrichConfig()).read(["pkg/a.py", "pkg/b.py"])
