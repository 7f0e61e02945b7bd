"""`repogym bench`: the statistics and options on their own, then quick runs on a real engine."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from repogym.bench.core import Context, Row, Stat, compare, row
from repogym.bench.cost import _apply_gold, plain_command, pytest_seconds
from repogym.bench.run import BenchConfig, targets
from repogym.bench.startup import startup_latency
from repogym.schema import Environment, Task
from repogym.scripts import bench


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    bench.add_parser(parser.add_subparsers())
    return parser.parse_args(["bench", *argv])


def run_cli(*argv: str) -> int:
    """`repogym bench ARGV`, the way the console script runs it."""
    from repogym.scripts.cli import main

    return main(["bench", *argv])


# --- no engine needed ----------------------------------------------------------------------------

def test_stat_median_and_decile_spread() -> None:
    s = Stat.of([float(x) for x in range(1, 12)])  # 1..11
    assert (s.n, s.median, s.p10, s.p90, s.min, s.max) == (11, 6.0, 2.0, 10.0, 1.0, 11.0)
    one = Stat.of([3.0])
    assert one.median == one.p10 == one.p90 == 3.0
    with pytest.raises(ValueError, match="repetition count"):
        Stat.of([])


def test_ratio_is_median_over_the_compared_rows_median() -> None:
    rows = [row("step.repogym.true", "a", "ms", [2.0, 2.0]),
            row("step.exec_run.true", "b", "ms", [50.0, 60.0])]
    rows = compare(rows, "step.exec_run.true", "step.repogym.true")
    assert rows[1].ratio == pytest.approx(27.5) and rows[1].vs == "step.repogym.true"
    assert rows[0].ratio is None


def test_targets_say_met_or_missed_and_skip_what_was_not_measured() -> None:
    rows = compare([row("step.repogym.true", "a", "ms", [7.0]),
                    row("step.exec_run.true", "b", "ms", [140.0]),
                    Row("reset.warm", "reset", "c", "ms", None, note="not measured: x")],
                   "step.exec_run.true", "step.repogym.true")
    goals = {t["row"]: t["met"] for t in targets(rows)}
    assert goals == {"step.repogym.true": False, "step.exec_run.true": True}


def test_grading_goals_are_the_ones_of_the_task_s_language() -> None:
    rows = compare([row("grade.submit", "a", "s", [1.2]), row("grade.nodisguise", "b", "s", [1.0]),
                    row("grade.overhead", "c", "s", [0.4]),
                    row("grade.overhead_fresh", "d", "s", [0.4])],
                   "grade.submit", "grade.nodisguise")
    python = {t["goal"]: t["met"] for t in targets(rows, "python")}
    assert python == {
        "every defence on: submit-to-reward within 1.25x of the same grade with disguise=False":
            True,
        "Python: submit-to-reward within 0.5 s of the tests run by hand": True}
    go = {t["goal"]: t["met"] for t in targets(rows, "go")}
    assert go["Go, JavaScript, Rust, Java: submit-to-reward within 0.3 s of the tests run by "
              "hand in a new container"] is False
    assert not any(goal.startswith("Python") for goal in go)


def test_pytest_seconds_reads_the_summary_line() -> None:
    log = "PASSED t.py::a\n=========== 1 failed, 69 passed in 0.49s ===========\n"
    assert pytest_seconds(log) == 0.49
    assert pytest_seconds("==== 3 passed in 61.20s (0:01:01) ====") == 61.2
    assert pytest_seconds("no summary here") is None


def test_tests_by_hand_run_the_language_runner_not_pytest() -> None:
    """A Rust task keeps Python's default ``test_cmd``: by hand, its tests are cargo's (pytest
    there collected nothing, so the 'tests by hand' figure measured an empty run)."""
    test_patch = ("diff --git a/tests/t.rs b/tests/t.rs\nnew file mode 100644\n--- /dev/null\n"
                  "+++ b/tests/t.rs\n@@ -0,0 +1 @@\n+#[test] fn t() {}\n")
    rust = Task(instance_id="r-1", repo="r", base_commit="0" * 40, problem_statement="x",
                patch="", test_patch=test_patch, FAIL_TO_PASS=["t"], PASS_TO_PASS=[],
                environment=Environment(language="rust"))
    command = plain_command(rust)
    assert "cargo test --offline" in command and "pytest" not in command
    python = Task(instance_id="p-1", repo="p", base_commit="0" * 40, problem_statement="x",
                  patch="", test_patch="", FAIL_TO_PASS=["tests/test_a.py::test_a"],
                  PASS_TO_PASS=[])
    assert plain_command(python) == f"{python.environment.test_cmd} tests/test_a.py"


def test_gold_patch_ending_in_a_blank_context_line_applies(toy_task: Task,
                                                            tmp_path: Path) -> None:
    """The patch goes to ``git apply`` as it is: its last line, a blank line of context, is
    a single space that a strip would remove (git then calls the patch corrupt)."""
    import subprocess

    run = lambda *a: subprocess.run(a, cwd=tmp_path, check=True, capture_output=True)  # noqa: E731
    (tmp_path / "a.rs").write_text("fn f() {\n    x\n}\n\nfn g() {}\n")
    run("git", "init", "-q")
    patch = ("diff --git a/a.rs b/a.rs\n--- a/a.rs\n+++ b/a.rs\n@@ -1,4 +1,5 @@\n fn f() {\n"
             "+    y\n     x\n }\n \n")

    class Shell:
        def step(self, action: dict[str, str]) -> tuple[object, ...]:
            proc = subprocess.run(["bash", "-c", action["command"]], cwd=tmp_path)
            return None, 0.0, False, False, {"exit_code": proc.returncode}

    _apply_gold(Context(toy_task.with_(patch=patch), "unused", "apply", lambda _m: None), Shell())
    assert (tmp_path / "a.rs").read_text().startswith("fn f() {\n    y\n    x\n")


def test_config_rejects_bad_values_with_what_to_change() -> None:
    with pytest.raises(ValueError, match="choose from"):
        BenchConfig(sections=("step", "warp"))
    with pytest.raises(ValueError, match=">= 1"):
        BenchConfig(steps=0)
    with pytest.raises(ValueError, match="env counts"):
        BenchConfig(parallel=(0,))


def test_options_map_onto_the_config() -> None:
    config = bench.config_from(parse("--only", "step,reset,memory", "--skip", "memory",
                                     "--parallel", "1,3", "--steps", "7"))
    assert config.sections == ("step", "reset") and config.parallel == (1, 3)
    assert config.steps == 7
    quick = bench.config_from(parse("--quick"))
    assert quick.steps < BenchConfig().steps and quick.parallel_seconds <= 1.0
    assert run_cli("--only", "nothing") == 2


# --- a real engine -------------------------------------------------------------------------------

def test_startup_is_measured_against_a_bare_python(toy_task: Task) -> None:
    ctx = Context(toy_task, "unused", "startup", progress=lambda _m: None)
    rows = {r.key: r for r in startup_latency(ctx, runs=2)}
    assert set(rows) == {"startup.python", "startup.version", "startup.help",
                         "startup.env_import"}
    assert all(r.stat is not None and r.stat.n == 2 for r in rows.values())
    assert rows["startup.help"].vs == "startup.python" and rows["startup.help"].ratio
    help_ms, env_ms = rows["startup.help"].stat, rows["startup.env_import"].stat
    assert help_ms is not None and env_ms is not None and help_ms.median < env_ms.median
    goal = targets(list(rows.values()))
    assert [t["row"] for t in goal] == ["startup.help"]


MEASURED = [
    "startup.python", "startup.help",
    "step.repogym.true", "step.shell.true", "step.docker_exec.true", "step.exec_run.true",
    "step.repogym.ls", "reset.warm", "reset.fresh", "reset.bare_run", "reset.refill",
    "reset.default", "reset.default_back_to_back", "vector.sync.containers",
    "vector.async.containers", "vector.async.reset", "fork.snapshot", "fork.branch",
    "fork.reset_in_place", "fork.replay", "fork.commit",
    "grade.pytest", "grade.plain", "grade.test_cmd", "grade.submit", "grade.overhead",
    "grade.over_summary", "grade.harness",
    "grade.cold", "grade.decoy", "grade.open", "grade.nodisguise", "grade.stage.stage",
    "grade.stage.run", "grade.stage.decoy", "grade.stage.collect", "grade.stage.score",
    "grade.plain_fresh", "grade.overhead_fresh", "grade.sequential", "grade.sequential.decoy",
    "parallel.steps_per_s.1", "parallel.steps_per_s.2", "parallel.latency.2",
    "memory.container", "memory.process", "memory.python", "teardown.close",
]


@pytest.mark.docker
def test_quick_bench_measures_every_section(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bench.json"
    assert run_cli("--quick", "--skip", "swebench,backends", "--parallel-seconds", "0.5",
                   "--out", str(out)) == 0
    result = json.loads(out.read_text())
    rows = {r["key"]: r for r in result["rows"]}
    missing = [k for k in MEASURED if rows.get(k, {}).get("stat") is None]
    assert not missing, f"not measured: {missing}"
    assert rows["step.repogym.true"]["stat"]["n"] == 10
    for key, vs in [("step.exec_run.true", "step.repogym.true"), ("reset.fresh", "reset.warm"),
                    ("parallel.steps_per_s.2", "parallel.steps_per_s.1"),
                    ("grade.open", "grade.submit")]:
        assert rows[key]["vs"] == vs and rows[key]["ratio"] > 0
    assert rows["grade.submit"]["note"] == "gold patch resolved 1/1"
    assert rows["memory.container"]["stat"]["median"] > 0
    assert {t["row"] for t in result["targets"]} >= {"step.repogym.true", "reset.fresh",
                                                      "reset.default"}
    assert rows["vector.async.containers"]["stat"]["median"] <= 2 + 2  # N=2: N + spare + grader
    printed = capsys.readouterr().out
    assert "p10-p90" in printed and "steps/s, 2 env(s)" in printed


@pytest.mark.docker
@pytest.mark.podman
@pytest.mark.bwrap
def test_backends_are_measured_against_docker_in_one_run(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    assert run_cli("--quick", "--only", "backends", "--out", str(out)) == 0
    rows = {r["key"]: r for r in json.loads(out.read_text())["rows"]}
    for backend in ("docker", "podman", "bwrap"):
        for measure in ("step", "reset_warm", "reset_fresh"):
            row = rows[f"backends.{backend}.{measure}"]
            assert row["stat"] is not None and row["stat"]["n"] >= 2, row["note"]
            if backend != "docker":
                assert row["vs"] == f"backends.docker.{measure}" and row["ratio"] > 0


@pytest.mark.docker
@pytest.mark.slow
def test_swebench_run_instance_is_measured_on_our_image(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    assert run_cli("--quick", "--only", "grade,swebench", "--logs-dir", str(tmp_path / "logs"),
                   "--out", str(out)) == 0
    rows = {r["key"]: r for r in json.loads(out.read_text())["rows"]}
    assert rows["swebench.total"]["stat"] is not None, rows["swebench.total"]["note"]
    total, report = rows["swebench.total"]["stat"], rows["swebench.report"]["stat"]
    assert total["median"] >= report["median"] > 0
    assert rows["swebench.total"]["vs"] == "grade.submit"
