"""`repogym tasks add ...`: flags, outputs, and the whole path through Docker."""

from __future__ import annotations

import argparse
import json
import subprocess
import textwrap
from pathlib import Path

import pytest

from repogym.schema import Task
from repogym.scripts.cli import main
from repogym.scripts.tasks_add import add_tasks_add_parser, run_tasks_add
from repogym.suite import load_suite
from repogym.tasks.sources import mutate


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="repogym")
    commands = parser.add_subparsers(dest="command", required=True)
    tasks = commands.add_parser("tasks")
    add_tasks_add_parser(tasks.add_subparsers(dest="tasks_command", required=True))
    return parser.parse_args(["tasks", "add", *argv])


def test_flags_of_every_source(tmp_path: Path) -> None:
    args = parse("git", "repo", "--out", "o", "--max", "5", "--seed", "3", "--runs", "1",
                 "--issues", "iss", "--setup", "a", "--setup", "b", "--python", "3.9")
    assert (args.add_source, args.path, args.out, args.max) == ("git", Path("repo"), Path("o"), 5)
    assert (args.seed, args.runs, args.split, args.rev) == (3, 1, "eval", "HEAD")
    assert args.setup == ["a", "b"] and args.issues == Path("iss") and args.func is run_tasks_add
    args = parse("replication", "r", "--out", "o", "--granularity", "class", "--split", "train")
    assert (args.granularity, args.min_lines, args.split) == ("class", 3, "train")
    args = parse("synthetic", "r", "--out", "o", "--operators", "off_by_one,flip_boolean")
    assert args.operators == ("off_by_one", "flip_boolean")
    assert parse("synthetic", "r", "--out", "o").operators == tuple(mutate.OPERATORS)
    args = parse("pypi", "attrs==23.1.0", "--out", "o", "--kinds", "synthetic",
                 "--pip-arg=--no-index")
    assert (args.requirement, args.kinds, args.pip_arg) == ("attrs==23.1.0", ("synthetic",),
                                                            ["--no-index"])
    args = parse("swebench", "i.jsonl", "--repos", "m", "--env", "e.yaml", "--out", "o",
                 "--instances", "a__b-1,a__b-2", "--no-validate")
    assert args.instances == ("a__b-1", "a__b-2") and args.no_validate
    args = parse("swebench", "i.parquet", "--out", "o", "--pull", "--dataset-split", "dev")
    assert (args.repos, args.env, args.pull, args.dataset_split) == (None, None, True, "dev")
    with pytest.raises(SystemExit):
        parse("git", "repo")  # --out is required


def test_bad_values_say_what_to_change(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                       ) -> None:
    assert main(["tasks", "add", "git", str(tmp_path), "--out", str(tmp_path), "--max",
                 "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("repogym: error: ") and "--max 0" in err
    assert main(["tasks", "add", "swebench", str(tmp_path / "none.json"), "--repos",
                 str(tmp_path), "--env", str(tmp_path), "--out", str(tmp_path / "o"),
                 "--no-validate"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("repogym: error: ") and "does not exist" in err


def _mirror(root: Path) -> str:
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "app.py").write_text("X = 1\n")
    git = ["git", "-c", "user.name=a", "-c", "user.email=a@b"]
    subprocess.run(git + ["add", "-A"], cwd=root, check=True)
    subprocess.run(git + ["commit", "-qm", "base"], cwd=root, check=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                          text=True, check=True).stdout.strip()


def test_swebench_without_validation_writes_a_suite(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    base = _mirror(tmp_path / "mirrors" / "octo" / "app")
    rows = [{"repo": "octo/app", "instance_id": f"octo__app-{n}", "base_commit": base,
             "patch": "", "test_patch": "", "problem_statement": "p", "version": "1.0",
             "FAIL_TO_PASS": '["tests/test_app.py::test_a"]', "PASS_TO_PASS": "[]"}
            for n in (1, 2)]
    rows.append({**rows[0], "instance_id": "octo__app-3", "version": "9.9"})
    rows.append({**rows[0], "instance_id": "other__lib-4", "repo": "other/lib"})
    (tmp_path / "instances.json").write_text(json.dumps(rows))
    (tmp_path / "env.yaml").write_text('octo/app:\n  "1.0":\n    python: "3.9"\n')
    out = tmp_path / "suite"
    args = parse("swebench", str(tmp_path / "instances.json"), "--repos",
                 str(tmp_path / "mirrors"), "--no-clone", "--env", str(tmp_path / "env.yaml"),
                 "--out", str(out), "--no-validate")
    assert run_tasks_add(args) == 0
    printed = capsys.readouterr()
    assert "tried 4, kept 3, rejected 1: no mirror (1)" in printed.out
    assert "[4/?] swebench other__lib-4: rejected: no mirror: put other/lib at" in printed.err
    tasks = load_suite(out)
    assert [t.instance_id for t in tasks] == ["octo__app-1", "octo__app-2", "octo__app-3"]
    assert tasks[0].FAIL_TO_PASS == ("tests/test_app.py::test_a",)
    assert tasks[0].environment.python == "3.9"  # --env overrides...
    # ...and only overrides: a version it lacks gets an environment all the same
    assert tasks[2].extra["environment_source"]["from"] == "detected from the repository's files"
    # the suite points at the shared mirror instead of copying it
    assert tasks[0].source == str(tmp_path / "mirrors" / "octo" / "app")
    assert not (out / "repos").exists()
    report = json.loads((out / "report.json").read_text())
    assert report["config"]["source"] == "swebench"
    assert report["config"]["options"]["validate"] is False
    assert (report["tried"], report["kept"], report["rejected"]) == (4, 3, 1)
    assert report["reasons"] == {"no mirror": 1}


# ---------------------------------------------------------------------------- Docker

LIB = textwrap.dedent('''\
    """Tiny text helpers."""


    def shout(text):
        """Upper-case ``text`` and add an exclamation mark."""
        if not text:
            return ""
        return text.upper() + "!"


    def words(text):
        """The words of ``text``, split on whitespace."""
        parts = text.split()
        return [p for p in parts if p]
    ''')
TESTS = textwrap.dedent('''\
    from textlib import shout, words


    def test_shout():
        assert shout("hi") == "HI!"


    def test_shout_empty():
        assert shout("") == ""


    def test_words():
        assert words(" a  b ") == ["a", "b"]
    ''')


def _project(root: Path) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "textlib.py").write_text(LIB)
    (root / "tests" / "test_textlib.py").write_text(TESTS)
    return root


def _add(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[Task], dict]:
    out = Path(argv[argv.index("--out") + 1])
    # certification plays every attack against each kept task: its own tests cover it, and
    # here it would take minutes
    code = run_tasks_add(parse(*argv, "--no-certify"))
    captured = capsys.readouterr()
    print(captured.out, captured.err)
    tasks = load_suite(out) if (out / "tasks.jsonl").exists() else []
    report = json.loads((out / "report.json").read_text()) if code != 2 else {}
    return code, tasks, report


@pytest.mark.docker
@pytest.mark.slow
def test_replication_through_docker_writes_validated_tasks(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from repogym.tasks.validate import validate_task

    out = tmp_path / "suite"
    code, tasks, report = _add(capsys, "replication", str(_project(tmp_path / "textlib")),
                               "--out", str(out), "--max", "2", "--runs", "1",
                               "--min-lines", "2")
    assert code == 0 and report["tried"] == 2 and len(tasks) == report["kept"] >= 1
    task = tasks[0]
    assert task.kind == "replication" and task.reference and task.FAIL_TO_PASS
    assert "raise NotImplementedError" not in task.reference["source"]
    assert validate_task(task, runs=1).ok  # the written suite grades: gold yes, empty no


@pytest.mark.docker
@pytest.mark.slow
def test_synthetic_through_docker(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "suite"
    code, tasks, report = _add(capsys, "synthetic", str(_project(tmp_path / "textlib")),
                               "--out", str(out), "--max", "2", "--runs", "1", "--workers", "2",
                               "--operators", "remove_early_return,invert_condition")
    assert report["tried"] == 2
    assert sum(report["reasons"].values()) == report["rejected"]
    assert code == (0 if tasks else 1)
    for task in tasks:
        assert task.kind == "synthetic" and task.FAIL_TO_PASS and task.PASS_TO_PASS
        # written from what the failing tests observed: the function, the failure, no code
        assert task.extra["statement_from"] == "tests" and "observed" not in task.extra
        assert "`textlib.shout`" in task.problem_statement
        assert all(f"`{t}`" in task.problem_statement for t in task.FAIL_TO_PASS)
        assert 'assert shout("") == ""' not in task.problem_statement
    # the gold played as an agent's diff: the layout's first task whole, the others on their
    # failing tests (one snapshot: one test layout)
    played = report.get("played_gold", {})
    if sum(played.values()) >= 1:
        assert played["graded_whole"] == 1, played
        assert played["graded_on_failing_tests"] == sum(played.values()) - 1, played
    # one snapshot image, a map, and reused containers
    assert report["checking"]["counts"]["traced runs"] == 1
    assert report["checking"]["containers"]["reused"] >= 1


@pytest.mark.docker
@pytest.mark.slow
def test_git_through_docker(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = _project(tmp_path / "textlib")
    (repo / "textlib.py").write_text(LIB.replace('        return ""\n', '        return "!"\n'))
    (repo / "tests" / "test_textlib.py").write_text(TESTS.split("def test_shout_empty")[0])
    git = ["git", "-c", "user.name=a", "-c", "user.email=a@b"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(git + ["add", "-A"], cwd=repo, check=True)
    subprocess.run(git + ["commit", "-qm", "start"], cwd=repo, check=True)
    (repo / "textlib.py").write_text(LIB)
    (repo / "tests" / "test_textlib.py").write_text(TESTS)
    subprocess.run(git + ["commit", "-qam", "shout('') must be empty"], cwd=repo, check=True)
    out = tmp_path / "suite"
    code, tasks, report = _add(capsys, "git", str(repo), "--out", str(out), "--runs", "1")
    assert code == 0 and report["kept"] == 1
    (task,) = tasks
    assert task.FAIL_TO_PASS == ("tests/test_textlib.py::test_shout_empty",)
    assert set(task.PASS_TO_PASS) == {"tests/test_textlib.py::test_shout",
                                      "tests/test_textlib.py::test_words"}
    # the commit message as context, then what the hidden test saw on the base code
    assert task.problem_statement.startswith("## shout('') must be empty\n")
    assert "`textlib.shout`" in task.problem_statement
    assert "assert '!' == ''" in task.problem_statement
    assert "test_shout_empty" not in task.problem_statement  # hidden tests stay unnamed
    assert task.extra["statement_from"] == "tests"
    # gold cases, recorded as the task was made: shout("") tells the fix apart
    cases = task.extra["gold_cases"]
    assert cases["scope"] == "boundary" and "textlib:shout" in cases["functions"]
    assert ["return", ""] in [c["expect"] for c in cases["cases"] if c["set"] == "discriminating"]
    assert report["config"]["gold_cases"] is True
