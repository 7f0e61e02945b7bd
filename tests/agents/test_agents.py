"""Fast tests: the agents, the name table, the statistics, the report, and the runner's
bookkeeping (resume, retries, failure kinds) over a tiny purpose-built environment."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

from repogym.agents.agent import Agent, AgentError
from repogym.agents.evaluation.html_report import render_html
from repogym.agents.evaluation.predictions import eval_tests_status, load_predictions, run_report
from repogym.agents.evaluation.runner import EvalConfig, rerun, run_eval
from repogym.agents.evaluation.summary import failure_kind, summarize, wilson_interval
from repogym.agents.gold import GoldAgent
from repogym.agents.null import NullAgent
from repogym.agents.random_agent import RandomAgent
from repogym.agents.registry import AGENTS, make_agent
from repogym.envs.actions import parse_action
from repogym.envs.grading.grader import GradingReport
from repogym.envs.tools import TOOL_SCHEMAS, Toolbox
from repogym.errors import SandboxError, TaskError
from repogym.sandbox.base import SandboxConfig
from repogym.sandbox.fake import FakeSandbox
from repogym.schema import Task
from repogym.scripts.eval_cmd import parse_options
from repogym.suite import write_suite

PATCH = "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"


def task(iid: str, repo: str = "o/r", kind: str = "swe", patch: str = PATCH) -> Task:
    return Task(instance_id=iid, repo=repo, base_commit="c" * 40, problem_statement="fix it",
                patch=patch, kind=kind)


# --- the agents ------------------------------------------------------------------------------


def test_unknown_agent_lists_the_valid_names() -> None:
    with pytest.raises(ValueError, match="unknown agent 'nope'") as err:
        make_agent("nope")
    for name in ("gold", "null", "random", "llm", "hacker"):
        assert name in str(err.value)
    assert AGENTS["hacker"] == "repogym.agents.hacker:HackerAgent"


def test_unknown_option_names_the_agents_options() -> None:
    with pytest.raises(ValueError, match="takes no option .'colour'.*seed"):
        make_agent("random", colour="red")


def test_module_path_and_tasks_are_passed_on() -> None:
    agent = make_agent("repogym.agents.gold:GoldAgent", tasks=[task("t1")])
    assert isinstance(agent, GoldAgent) and isinstance(agent, Agent)
    assert set(agent.tasks) == {"t1"}


def test_gold_applies_the_patch_with_the_env_tools_then_submits() -> None:
    agent = GoldAgent(tasks=[task("t1")])
    agent.reset("prompt", {"task_id": "t1"})
    create, bash, submit = (parse_action(agent.act("obs", {})) for _ in range(3))
    assert create.name == "create" and create.arguments["file_text"] == PATCH
    assert create.arguments["path"].startswith("/tmp/")
    assert bash.name == "bash" and f"git apply --whitespace=nowarn {create.arguments['path']}" \
        in bash.arguments["command"]
    assert submit.name == "submit"


def test_gold_without_the_task_or_its_patch_is_an_agent_error() -> None:
    with pytest.raises(AgentError, match="no task 'other'"):
        GoldAgent(tasks=[task("t1")]).reset("p", {"task_id": "other"})
    with pytest.raises(AgentError, match="no gold patch"):
        GoldAgent(tasks=[task("t1", patch="")]).reset("p", {"task_id": "t1"})


def test_null_submits_at_once() -> None:
    agent = NullAgent()
    agent.reset("p", {"task_id": "t"})
    assert parse_action(agent.act("p", {})).name == "submit"


def play_random(agent: RandomAgent, repo: Path, task_id: str) -> list[dict[str, Any]]:
    """Plays the random agent against the real toolbox over a local folder."""
    box = Toolbox(FakeSandbox(SandboxConfig(image="x"), source=repo), bash_timeout=10)
    agent.reset("p", {"task_id": task_id})
    actions: list[Any] = []
    obs, info = "p", dict[str, Any]()
    for _ in range(20):
        action = agent.act(obs, info)
        actions.append(action)
        call = parse_action(action)
        result = box.call(call)
        assert result.error is None, (action, result.output)
        if result.submitted:
            return actions
        obs, info = result.output, {"action_error": result.error, "exit_code": result.exit_code}
    raise AssertionError(f"no submit within 20 steps: {actions}")


def test_random_makes_valid_calls_and_repeats_with_its_seed(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "m.py").write_text("x = 1\n")
    (repo / "README.md").write_text("hi\n")
    runs = [play_random(RandomAgent(seed=3, min_steps=4, max_steps=8), repo, "t")
            for _ in range(2)]
    assert runs[0] == runs[1] and 5 <= len(runs[0]) <= 9
    others = {json.dumps(play_random(RandomAgent(seed=s, min_steps=4, max_steps=8), repo, "t"))
              for s in range(6)}
    assert len(others) > 1, "every seed gave the same episode"


# --- statistics and the report ---------------------------------------------------------------


def test_wilson_interval_matches_known_values() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)
    lo, hi = wilson_interval(5, 10)
    assert (round(lo, 4), round(hi, 4)) == (0.2366, 0.7634)
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0 and round(hi, 4) == 0.2775
    lo, hi = wilson_interval(10, 10)
    assert round(lo, 4) == 0.7225 and hi == 1.0
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def row(iid: str, resolved: bool, error_kind: str | None = None, repo: str = "o/r",
        **extra: Any) -> dict[str, Any]:
    comps = {} if error_kind else {"resolved": float(resolved), "patch_applied": 1.0,
                                   "invalid": 0.0, "tests_tampered": 0.0}
    return {"instance_id": iid, "repo": repo, "kind": "swe", "resolved": resolved,
            "reward": float(resolved), "reward_components": comps, "error_kind": error_kind,
            "timings": {"total": 10.0, "reset": 1.0, "agent": 2.0, "env": 3.0, "grading": 4.0},
            **extra}


def test_infrastructure_failures_are_left_out_of_the_rate() -> None:
    rows = [row("a", True), row("b", False), row("c", False, "infrastructure"),
            row("d", False, "agent", repo="x/y"), row("e", False, truncation="max_steps")]
    s = summarize(rows, wall_seconds=30.0, n_run=5)
    assert (s["resolved"], s["n_counted"], s["resolved_rate"]) == (1, 4, 0.25)
    assert s["excluded"]["infrastructure"] == ["c"]
    assert s["failures"] == {"agent_error": 1, "infrastructure": 1, "tests_failed": 1,
                             "truncated": 1}
    assert s["by_repo"]["x/y"]["n"] == 1 and s["by_repo"]["o/r"]["n"] == 3
    assert s["tasks_per_minute"] == pytest.approx(10.0)
    assert s["resolved_ci95"] == list(wilson_interval(1, 4))


def test_failure_kinds() -> None:
    assert failure_kind(row("a", True)) is None
    invalid = row("b", False)
    invalid["reward_components"]["invalid"] = 1.0
    assert failure_kind(invalid) == "invalid_run"
    unapplied = row("c", False, flags=["patch_failed"])
    unapplied["reward_components"]["patch_applied"] = 0.0
    assert failure_kind(unapplied) == "patch_failed"
    assert failure_kind({"instance_id": "d", "empty_patch": True}) == "empty_patch"


def test_report_is_self_contained_and_draws_the_rates() -> None:
    rows = [row("a<b", True), row("c", False), row("d", False, repo="x/y")]
    html = render_html(summarize(rows), rows, {"agent": "gold", "suite": "s"}, Path("."))
    assert html.count("<svg") == 3
    assert "<script" not in html and not re.search(r'(src|href)="https?:', html)
    assert "a&lt;b" in html and "a<b" not in html
    # o/r resolved 1 of 2: its bar is half of the 420-pixel axis
    assert 'width="210.0"' in html


# --- configuration ---------------------------------------------------------------------------


def test_config_validates_and_keeps_credentials_out() -> None:
    with pytest.raises(ValueError, match="workers=0"):
        EvalConfig(suite="demo", workers=0)
    with pytest.raises(ValueError, match="unknown agent"):
        EvalConfig(suite="demo", agent="nope")
    config = EvalConfig(suite="demo", agent="llm", agent_options={"model": "m", "api_key": "s"})
    data = config.to_dict()
    assert data["agent_options"] == {"model": "m", "api_key": "<redacted>"}
    again = EvalConfig.from_dict(json.loads(json.dumps(data)))
    assert again.agent_options == {"model": "m"} and again.suite == "demo"


def test_agent_options_parse_as_json_when_they_can() -> None:
    assert parse_options(["max_steps=3", "model=gpt-4o", "x=[1, 2]"]) == {
        "max_steps": 3, "model": "gpt-4o", "x": [1, 2]}


# --- the runner over a tiny environment ------------------------------------------------------


class TinyEnv(gym.Env[str, Any]):
    """Resolved when the agent created a file before submitting. ``failures`` maps a task id
    to exceptions that its next resets raise, one each."""

    def __init__(self, failures: dict[str, list[Exception]]) -> None:
        self.failures = failures
        self.created, self.steps = False, 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[str, dict[str, Any]]:
        task_id = (options or {})["task_id"]
        if self.failures.get(task_id):
            raise self.failures[task_id].pop(0)
        self.created, self.steps = False, 0
        return "fix it", {"task_id": task_id, "tools": TOOL_SCHEMAS, "image": None}

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        call = parse_action(action)
        self.steps += 1
        self.created |= call.name == "create"
        if call.name != "submit":
            return "ok", 0.0, False, self.steps >= 5, {"truncation": None}
        comps = {"resolved": float(self.created), "patch_applied": float(self.created),
                 "invalid": 0.0, "tests_tampered": 0.0}
        return "Submitted.", comps["resolved"], True, False, {
            "resolved": self.created, "reward_components": comps, "flags": [],
            "patch": "diff" if self.created else "", "grading": {"total_seconds": 0.01}}


def tiny_run(tmp_path: Path, agent: str, tasks: list[Task],
             failures: dict[str, list[Exception]] | None = None, **kw: Any) -> dict[str, Any]:
    config = EvalConfig(suite="tiny", agent=agent, out=str(tmp_path / "run"),
                        retry_backoff=0.0, **kw)
    plan = failures if failures is not None else {}
    return run_eval(config, tasks=tasks, env_factory=lambda *_: TinyEnv(plan))


def results(tmp_path: Path, run: str = "run") -> dict[str, dict[str, Any]]:
    lines = (tmp_path / run / "results.jsonl").read_text().splitlines()
    return {r["instance_id"]: r for r in map(json.loads, lines)}


def test_runner_writes_every_file_and_resumes(tmp_path: Path) -> None:
    tasks = [task(f"t{i}", repo=f"o/r{i % 2}") for i in range(5)]
    summary = tiny_run(tmp_path, "gold", tasks, workers=3)
    assert (summary["resolved"], summary["n_run"]) == (5, 5)
    for name in ("results.jsonl", "summary.json", "report.html", "config.json"):
        assert (tmp_path / "run" / name).exists(), name
    rows = results(tmp_path)
    assert set(rows) == {t.instance_id for t in tasks}
    assert all(r["steps"] == 3 and r["attempts"] == 1 for r in rows.values())
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["task_hashes"]["t0"] == tasks[0].task_hash
    assert config["versions"]["repogym"] and config["config"]["agent"] == "gold"
    again = tiny_run(tmp_path, "gold", tasks, workers=3)
    assert again["n_run"] == 0 and again["resolved"] == 5
    assert len((tmp_path / "run" / "results.jsonl").read_text().splitlines()) == 5
    with pytest.raises(TaskError, match="other settings"):
        tiny_run(tmp_path, "null", tasks)


def test_infrastructure_failures_are_retried_then_reported_apart(tmp_path: Path) -> None:
    tasks = [task("flaky"), task("broken"), task("fine")]
    failures: dict[str, list[Exception]] = {
        "flaky": [SandboxError("container died")],
        "broken": [SandboxError("no"), SandboxError("no"), SandboxError("no")]}
    summary = tiny_run(tmp_path, "gold", tasks, failures, retries=2)
    rows = results(tmp_path)
    assert rows["flaky"]["resolved"] and rows["flaky"]["attempts"] == 2
    assert rows["broken"]["error_kind"] == "infrastructure" and rows["broken"]["attempts"] == 3
    assert "container died" not in rows["broken"]["error"] and "SandboxError" in rows["broken"][
        "error"]
    assert (summary["resolved"], summary["n_counted"]) == (2, 2)
    assert summary["excluded"]["infrastructure"] == ["broken"]
    # a rerun into the same folder tries the infrastructure failure again, and only it
    summary = tiny_run(tmp_path, "gold", tasks, {}, retries=2)
    assert summary["n_run"] == 1 and summary["resolved"] == 3


def test_agent_and_task_failures_are_told_apart(tmp_path: Path) -> None:
    tasks = [task("no-patch", patch=""), task("bad-task"), task("ok")]
    summary = tiny_run(tmp_path, "gold", tasks, {"bad-task": [TaskError("malformed")]})
    rows = results(tmp_path)
    assert rows["no-patch"]["error_kind"] == "agent" and rows["no-patch"]["attempts"] == 1
    assert rows["bad-task"]["error_kind"] == "task" and rows["bad-task"]["attempts"] == 1
    assert (summary["resolved"], summary["n_counted"]) == (1, 2)
    assert summary["failures"] == {"agent_error": 1, "task_error": 1}


def test_rerun_repeats_a_run_from_its_config(tmp_path: Path) -> None:
    suite = write_suite([task("a"), task("b"), task("c")], tmp_path / "suite")
    config = EvalConfig(suite=str(suite), agent="random", agent_options={"seed": 7},
                        task_ids=("a", "b"), max_steps=4, out=str(tmp_path / "run"))
    tiny = lambda *_: TinyEnv({})  # noqa: E731
    first = run_eval(config, env_factory=tiny)
    second = rerun(tmp_path / "run", str(tmp_path / "again"), env_factory=tiny)
    assert second["n_run"] == 2 and second["n_tasks"] == 2
    saved = json.loads((tmp_path / "again" / "config.json").read_text())["config"]
    assert saved == {**config.to_dict(), "out": str(tmp_path / "again")}
    keep = ("resolved", "steps", "reward")
    assert {i: [r[k] for k in keep] for i, r in results(tmp_path, "again").items()} == {
        i: [r[k] for k in keep] for i, r in results(tmp_path).items()}
    assert first["resolved"] == second["resolved"]


def test_null_resolves_nothing(tmp_path: Path) -> None:
    summary = tiny_run(tmp_path, "null", [task("a"), task("b")], workers=2)
    assert summary["resolved"] == 0 and summary["failures"] == {"empty_patch": 2}


# --- predictions -----------------------------------------------------------------------------


def test_predictions_load_from_every_harness_format(tmp_path: Path) -> None:
    preds: list[dict[str, Any]] = [
        {"instance_id": "a", "model_patch": "p", "model_name_or_path": "m"},
        {"instance_id": "b", "model_patch": None, "model_name_or_path": "m"}]
    (tmp_path / "p.json").write_text(json.dumps(preds))
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    (tmp_path / "d.json").write_text(json.dumps({p["instance_id"]: p for p in preds}))
    for name in ("p.json", "p.jsonl", "d.json"):
        loaded = load_predictions(tmp_path / name)
        assert set(loaded) == {"a", "b"} and loaded["a"]["model_patch"] == "p"
    (tmp_path / "bad.json").write_text(json.dumps([{"instance_id": "a"}]))
    with pytest.raises(TaskError, match="lacks instance_id or model_patch"):
        load_predictions(tmp_path / "bad.json")


def test_a_file_of_several_systems_is_never_cut_to_one(tmp_path: Path) -> None:
    from repogym.agents.evaluation.predictions import system_folders, systems

    preds = [{"instance_id": i, "model_patch": f"{m}-{i}", "model_name_or_path": m}
             for m in ("org/a", "b") for i in ("x", "y")]
    file = tmp_path / "p.jsonl"
    file.write_text("".join(json.dumps(p) + "\n" for p in preds))
    assert systems(file) == ["org/a", "b"]
    with pytest.raises(TaskError, match="2 systems .org/a, b.*writes a run per system"):
        load_predictions(file)
    assert {i: p["model_patch"] for i, p in load_predictions(file, "b").items()} == {
        "x": "b-x", "y": "b-y"}
    with pytest.raises(TaskError, match="no predictions of 'c'"):
        load_predictions(file, "c")
    assert system_folders(["org/a", "org_a", "", "org/a?"]) == {
        "org/a": "org__a", "org_a": "org_a", "": "unnamed", "org/a?": "org__a_"}


def test_run_report_has_the_harness_fields() -> None:
    tasks = [task(i) for i in ("a", "b", "c", "d", "e")]
    preds = {i: {"instance_id": i, "model_patch": "" if i == "c" else "p",
                 "model_name_or_path": "m"} for i in ("a", "b", "c", "d")}
    rows = {"a": row("a", True), "b": row("b", False), "c": row("c", False),
            "d": row("d", False, "infrastructure", error="SandboxError: x")}
    report = run_report(tasks, preds, rows)
    assert report["resolved_ids"] == ["a"] and report["unresolved_ids"] == ["b"]
    assert report["empty_patch_ids"] == ["c"] and report["incomplete_ids"] == ["e"]
    assert report["error_ids"] == ["d"] and report["infra_failure_ids"] == ["d"]
    assert (report["total_instances"], report["submitted_instances"]) == (5, 4)
    assert report["completed_instances"] == 2 and report["schema_version"] == 2


def test_tests_status_counts_only_explicit_passes() -> None:
    report = GradingReport("a", fail_to_pass={"t::f": "PASSED", "t::g": "SKIPPED"},
                           pass_to_pass={"t::p": "XFAIL", "t::q": "FAILED"})
    status = eval_tests_status(report)
    assert status["FAIL_TO_PASS"] == {"success": ["t::f"], "failure": ["t::g"]}
    assert status["PASS_TO_PASS"] == {"success": ["t::p"], "failure": ["t::q"]}
    report.valid = False
    assert eval_tests_status(report)["FAIL_TO_PASS"]["success"] == []


class ClosingAgent:
    """Submits at once; counts its close() calls."""

    closed = 0

    def reset(self, obs: str, info: dict[str, Any]) -> None:
        pass

    def act(self, obs: str, info: dict[str, Any]) -> dict[str, Any]:
        return {"tool": "submit"}

    def close(self) -> None:
        ClosingAgent.closed += 1


def test_the_episode_worker_closes_its_agent(calc_tasks: list[Task], tmp_path: Path) -> None:
    from repogym.agents.evaluation.episode import EpisodeWorker

    config = EvalConfig(suite="unused", agent=f"{__name__}:ClosingAgent", out=str(tmp_path))

    def fake_env(config: EvalConfig, tasks: list[Task], model: str | None = None) -> Any:
        return gym.make("repogym/SWE-v0", tasks=tasks, sandbox="fake")

    ClosingAgent.closed = 0
    worker = EpisodeWorker(config, calc_tasks[:1], env_factory=fake_env)
    row = worker.run(calc_tasks[0])
    assert row["steps"] == 1 and ClosingAgent.closed == 1  # after its episode
    worker.close()
    assert ClosingAgent.closed == 2  # and when the worker ends
