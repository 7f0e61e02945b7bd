"""`repogym eval` for real: Docker containers, the real grader, a two-task suite."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from repogym.agents.evaluation.runner import EvalConfig, run_eval
from repogym.schema import Task
from repogym.scripts.cli import main
from repogym.suite import write_suite

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def suite(calc_tasks: list[Task], tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("suite")
    write_suite(calc_tasks, folder)
    return folder


@pytest.fixture(scope="module")
def gold_run(suite: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("runs") / "gold"
    assert main(["eval", "--suite", str(suite), "--agent", "gold", "--workers", "2",
                 "--out", str(out), "--quiet"]) == 0
    return out


def lines(path: Path) -> dict[str, dict[str, Any]]:
    return {r["instance_id"]: r for r in map(json.loads, path.read_text().splitlines())}


def test_gold_resolves_every_task_and_writes_every_file(gold_run: Path) -> None:
    rows = lines(gold_run / "results.jsonl")
    assert set(rows) == {"calc__add", "calc__mul"}
    for row in rows.values():
        assert row["resolved"] is True and row["reward"] == 1.0 and row["error_kind"] is None
        assert row["reward_components"]["f2p_pass_rate"] == 1.0
        assert row["steps"] == 3 and Path(row["record"]).exists()
        assert row["timings"]["grading"] > 0 and row["image_id"].startswith("sha256:")
    summary = json.loads((gold_run / "summary.json").read_text())
    assert summary["resolved_rate"] == 1.0 and summary["n_counted"] == 2
    assert set(summary["by_kind"]) == {"swe", "synthetic"}
    config = json.loads((gold_run / "config.json").read_text())
    assert config["config"]["agent"] == "gold" and config["versions"]["docker_engine"]
    assert config["versions"]["swebench"] and config["versions"]["python"]
    assert list(config["images"].values())[0].startswith("sha256:")
    assert set(config["task_hashes"]) == set(rows)
    assert (gold_run / "report.html").read_text().count("<svg") == 3


def test_a_second_run_resumes(gold_run: Path, capsys: Any) -> None:
    before = (gold_run / "results.jsonl").read_text()
    start = time.monotonic()
    assert main(["eval", "--rerun", str(gold_run), "--out", str(gold_run), "--quiet"]) == 0
    assert time.monotonic() - start < 10, "a finished run should not run again"
    assert (gold_run / "results.jsonl").read_text() == before
    assert "2/2 resolved" in capsys.readouterr().out


def test_null_scores_zero(suite: Path, tmp_path: Path) -> None:
    assert main(["eval", "--suite", str(suite), "--agent", "null", "--workers", "2",
                 "--out", str(tmp_path / "null"), "--quiet"]) == 0
    rows = lines(tmp_path / "null" / "results.jsonl")
    assert [(r["resolved"], r["reward"]) for r in rows.values()] == [(False, 0.0)] * 2
    summary = json.loads((tmp_path / "null" / "summary.json").read_text())
    assert summary["resolved_rate"] == 0.0 and summary["failures"] == {"empty_patch": 2}


def test_predictions_are_graded_in_the_harness_format(suite: Path, calc_tasks: list[Task],
                                                      tmp_path: Path) -> None:
    add = next(t for t in calc_tasks if t.instance_id == "calc__add")
    preds = [{"instance_id": "calc__add", "model_patch": add.patch, "model_name_or_path": "m/x"},
             # applies, but fixes the wrong function
             {"instance_id": "calc__mul", "model_patch": add.patch, "model_name_or_path": "m/x"}]
    (tmp_path / "preds.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    out = tmp_path / "preds"
    assert main(["eval", "--suite", str(suite), "--predictions", str(tmp_path / "preds.jsonl"),
                 "--workers", "2", "--out", str(out), "--quiet"]) == 0
    reports = json.loads((out / "instance_reports.json").read_text())
    assert reports["calc__add"]["resolved"] is True
    assert reports["calc__add"]["tests_status"]["FAIL_TO_PASS"]["success"] == [
        "tests/test_add.py::test_add"]
    mul = reports["calc__mul"]
    assert mul["patch_successfully_applied"] is True and mul["resolved"] is False
    assert mul["tests_status"]["FAIL_TO_PASS"]["failure"] == ["tests/test_mul.py::test_mul"]
    assert mul["tests_status"]["PASS_TO_PASS"]["success"] == ["tests/test_ops.py::test_sub"]
    run = json.loads((out / "m__x.preds.json").read_text())
    assert run["resolved_ids"] == ["calc__add"] and run["unresolved_ids"] == ["calc__mul"]
    assert run["completed_instances"] == 2 and run["error_ids"] == []
    assert json.loads((out / "summary.json").read_text())["resolved"] == 1


def test_a_file_of_two_systems_is_graded_per_system(suite: Path, calc_tasks: list[Task],
                                                   tmp_path: Path, capsys: Any) -> None:
    add = next(t for t in calc_tasks if t.instance_id == "calc__add")
    preds = [{"instance_id": "calc__add", "model_patch": add.patch, "model_name_or_path": "good"},
             {"instance_id": "calc__add", "model_patch": "", "model_name_or_path": "org/idle"},
             {"instance_id": "calc__mul", "model_patch": add.patch,
              "model_name_or_path": "org/idle"}]
    (tmp_path / "two.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    out = tmp_path / "two"
    assert main(["eval", "--suite", str(suite), "--predictions", str(tmp_path / "two.jsonl"),
                 "--workers", "2", "--out", str(out), "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert {k: (v["resolved"], v["out"]) for k, v in summary["systems"].items()} == {
        "good": (1, str(out / "good")), "org/idle": (0, str(out / "org__idle"))}
    assert set(lines(out / "good" / "results.jsonl")) == {"calc__add"}
    idle = lines(out / "org__idle" / "results.jsonl")
    assert idle["calc__add"]["empty_patch"] and idle["calc__mul"]["resolved"] is False
    assert json.loads((out / "good" / "good.good.json").read_text())["resolved_ids"] == [
        "calc__add"]
    assert (out / "org__idle" / "report.html").exists()
    printed = capsys.readouterr().out
    assert "== good" in printed and "== org/idle" in printed and "org/idle  0/2" in printed


def test_llm_agent_resolves_a_task_with_a_scripted_model(suite: Path, chat_server: Any,
                                                         tmp_path: Path) -> None:
    fix = {"path": "calc/ops.py", "old_str": "def add(a, b):\n    return a - b",
           "new_str": "def add(a, b):\n    return a + b"}
    chat_server.script += [
        chat_server.tool("view", {"path": "calc/ops.py"}, "c1"),
        chat_server.tool("str_replace", fix, "c2"),
        chat_server.tool("bash", {"command": "python3 -c 'from calc.ops import add; "
                                             "print(add(2, 3))'"}, "c3"),
        chat_server.tool("submit", {}, "c4")]
    config = EvalConfig(suite=str(suite), agent="llm", task_ids=("calc__add",),
                        out=str(tmp_path / "llm"), agent_options={
                            "base_url": chat_server.base_url, "model": "scripted",
                            "api_key": "sk-test"})
    summary = run_eval(config)
    assert summary["resolved"] == 1
    # the model saw each tool's real output
    messages = chat_server.requests[-1]["body"]["messages"]
    assert "return a - b" in messages[3]["content"] and messages[-1]["content"].strip() == "5"
    saved = json.loads((tmp_path / "llm" / "config.json").read_text())
    assert saved["config"]["agent_options"]["api_key"] == "<redacted>"


@pytest.mark.slow
def test_local_ray_gives_the_same_results(suite: Path, gold_run: Path, tmp_path: Path) -> None:
    try:
        import ray  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            raise
        pytest.skip("ray is not installed: pip install 'repogym[ray]'")
    summary = run_eval(EvalConfig(suite=str(suite), agent="gold", workers=2, ray="local",
                                  out=str(tmp_path / "ray")))
    threads, on_ray = lines(gold_run / "results.jsonl"), lines(tmp_path / "ray" / "results.jsonl")
    keys = ("resolved", "reward", "reward_components", "steps", "error_kind", "image_id")
    assert {i: [r[k] for k in keys] for i, r in on_ray.items()} == {
        i: [r[k] for k in keys] for i, r in threads.items()}
    assert summary["resolved"] == 2


def test_repeat_reports_the_stability_of_each_verdict(suite: Path, tmp_path: Path,
                                                      capsys: Any) -> None:
    out = tmp_path / "repeated"
    assert main(["eval", "--suite", str(suite), "--agent", "gold", "--workers", "2",
                 "--repeat", "2", "--out", str(out), "--quiet"]) == 0
    found = json.loads((out / "stability.json").read_text())
    assert found["repeat"] == 2 and found["stable"] == found["tasks"] == 2
    assert found["per_task"]["calc__add"]["verdicts"] == ["R", "R"]
    assert (out / "repeat-1" / "results.jsonl").exists() and (out / "repeat-2" / "report.html")
    assert "2 of 2 tasks gave the same verdict in every run" in capsys.readouterr().out
