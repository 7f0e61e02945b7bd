"""tools/corpus.py: the breadth corpus is what docs/breadth.md says (at least 40 package index
releases, 10 git repositories, each with the features it brings), a run over it resumes, and
its table counts what each project's `tasks add` wrote."""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def corpus_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("corpus_tool", ROOT / "tools" / "corpus.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["corpus_tool"] = module
    spec.loader.exec_module(module)
    return module


def test_the_corpus_is_broad() -> None:
    tool = corpus_tool()
    projects = tool.load_corpus(tool.CORPUS)
    pypi = [p for p in projects if p["source"] == "pypi"]
    git = [p for p in projects if p["source"] == "git"]
    assert len(pypi) >= 40 and len(git) >= 10
    assert all("==" in p["spec"] for p in pypi)  # pinned: a run can be repeated
    styles = " ".join(s for p in projects for s in p["styles"])
    for feature in ("unittest", "pytest", "doctests", "src layout", "tests inside the package",
                    "parametrization", "odd characters in ids", "conftest fixtures",
                    "data-driven", "single module"):
        assert feature in styles, feature


def _suite(out: Path, name: str, outcomes: list[tuple[bool, str]], certs: list[str]) -> None:
    suite = out / name
    suite.mkdir(parents=True)
    kept = [o for o in outcomes if o[0]]
    reasons: dict[str, int] = {}
    for ok, kind in outcomes:
        if not ok:
            reasons[kind] = reasons.get(kind, 0) + 1
    (suite / "report.json").write_text(json.dumps(
        {"tried": len(outcomes), "kept": len(kept), "reasons": reasons}))
    rows = []
    for i, result in enumerate(certs):
        attacks = {"always_eq": {"reward": 0.0, "resolved": False, "f2p_pass_rate": 0.0,
                                 "valid": False},
                   "edit_test": {"reward": 0.0, "resolved": False,
                                 "f2p_pass_rate": 0.5 if result == "hackable" else 0.0,
                                 "valid": True}}
        rows.append({"instance_id": f"{name}-{i}", "certificate": {
            "result": result, "attacks": attacks, "seconds": 10.0}})
    (suite / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (out / f"{name}.json").write_text(json.dumps(
        {"name": name, "status": "done", "exit": 0, "seconds": 300.0,
         "load": {"mean": 2.0, "max": 3.0}}))


def test_the_table_counts_each_projects_outcomes(tmp_path: Path) -> None:
    tool = corpus_tool()
    _suite(tmp_path, "a", [(True, ""), (True, ""), (True, ""), (False, "leak")],
           ["pass", "pass", "incomplete"])
    _suite(tmp_path, "b", [(True, ""), (False, "leak"), (False, "tests not collected")],
           ["hackable"])
    projects = [{"name": n, "source": "pypi", "spec": f"{n}==1", "why": "x"}
                for n in ("a", "b", "c")]
    text = tool.write_table(tmp_path, projects)
    rows = {r["name"]: r for r in json.loads((tmp_path / "table.json").read_text())}
    assert rows["a"]["kept"] == 3 and rows["a"]["seconds_per_kept"] == 100.0
    assert rows["a"]["certificates"] == {"pass": 2, "incomplete": 1, "hackable": 0}
    assert rows["b"]["rejected"] == {"leak": 1, "tests not collected": 1}
    assert rows["b"]["attacks_won_on_kept"] == ["b-0:edit_test"]
    assert rows["c"]["status"] == "not run" and "tried" not in rows["c"]
    assert "2 of 3 projects ran; 1 of them (50%) kept at least 3 tasks" in text
    assert "1 incomplete certificates; 1 attacks scored above 0" in text


def test_a_finished_project_is_not_run_again(tmp_path: Path) -> None:
    tool = corpus_tool()
    corpus = tmp_path / "corpus.json"
    corpus.write_text(json.dumps({"projects": [
        {"name": "a", "source": "pypi", "spec": "a==1", "why": "x"},
        {"name": "g", "source": "git", "spec": "nobody/nothing", "why": "x"}]}))
    out = tmp_path / "out"
    out.mkdir()
    (out / "a.json").write_text(json.dumps({"name": "a", "status": "done"}))
    code = tool.main(["--corpus", str(corpus), "run", "--out", str(out), "--mirrors",
                      str(tmp_path / "mirrors"), "--repogym", "/bin/false"])
    assert code == 1  # the git project has no mirror: said so, not run
    assert json.loads((out / "a.json").read_text()) == {"name": "a", "status": "done"}
    state = json.loads((out / "g.json").read_text())
    assert state["status"] == "no source" and "no mirror of nobody/nothing" in state["error"]


def test_a_project_whose_tasks_add_failed_is_run_again_and_says_why(tmp_path: Path) -> None:
    """tasks add refuses to resume a progress file written by another configuration (another
    checkout of repogym) with exit 2: that is no finished project. It was recorded "done" and
    skipped from then on; the table showed a line of its log as though it had run."""
    tool = corpus_tool()
    corpus = tmp_path / "corpus.json"
    corpus.write_text(json.dumps({"projects": [
        {"name": "a", "source": "pypi", "spec": "a==1", "why": "x"},
        {"name": "b", "source": "pypi", "spec": "b==1", "why": "x"}]}))
    fake = tmp_path / "repogym"  # stands in for the command: exits as tasks add would
    fake.write_text("#!/bin/sh\ncase \"$4\" in a==1) echo 'repogym: error: progress.jsonl "
                    "belongs to an unfinished run with another configuration'; exit 2;; "
                    "*) exit 1;; esac\n")
    fake.chmod(0o755)
    out = tmp_path / "out"
    argv = ["--corpus", str(corpus), "run", "--out", str(out), "--repogym", str(fake)]
    assert tool.main(argv) == 1
    a, b = (json.loads((out / f"{n}.json").read_text()) for n in "ab")
    assert (a["status"], a["exit"]) == ("failed", 2) and "another configuration" in a["error"]
    assert (b["status"], b["exit"]) == ("done", 1)  # ran, kept nothing: finished
    row = next(r for r in tool.markdown([tool.project_row(
        {"name": "a", "source": "pypi", "spec": "a==1"}, out)]).splitlines() if "| a |" in r)
    assert "failed (exit 2): repogym: error: progress.jsonl belongs" in row
    fake.write_text("#!/bin/sh\necho \"$4\" >> " + str(tmp_path / "ran") + "\nexit 0\n")
    assert tool.main(argv) == 0
    assert (tmp_path / "ran").read_text().split() == ["a==1"]  # b finished: not again


def test_keep_goes_to_every_tasks_add(tmp_path: Path) -> None:
    tool = corpus_tool()
    project = {"name": "a", "source": "pypi", "spec": "a==1", "why": "x"}
    args = argparse.Namespace(repogym="/x/repogym", max=10, keep=3, extra=["--workers", "2"])
    assert tool.command(project, tmp_path, args) == [
        "/x/repogym", "tasks", "add", "pypi", "a==1", "--out", str(tmp_path / "a"), "--max",
        "10", "--keep", "3", "--workers", "2"]
    args.keep = 0
    assert "--keep" not in tool.command(project, tmp_path, args)
