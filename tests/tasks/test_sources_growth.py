"""Workers, the progress file that resumes an interrupted run, and suites that grow."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from repogym.errors import TaskError
from repogym.schema import Task
from repogym.suite import load_suite
from repogym.tasks.sources.common import Candidate, Rejected
from repogym.tasks.sources.loop import collect
from repogym.tasks.sources.outdir import PROGRESS, OutputError, SuiteFolder


class SlowSource:
    """Keeps ids ending in "ok" after a delay that makes later candidates finish first."""

    name = "slow"

    def __init__(self, items: list[Candidate]) -> None:
        self.items = items
        self.active = 0
        self.most = 0
        self.lock = threading.Lock()

    def candidates(self) -> Iterator[Candidate]:
        yield from self.items

    def check(self, task: Task) -> tuple[Task | None, str]:
        with self.lock:
            self.active += 1
            self.most = max(self.most, self.active)
        time.sleep(0.2 if task.instance_id.startswith("1") else 0.05)
        with self.lock:
            self.active -= 1
        if task.instance_id.endswith("boom"):
            raise TaskError("bad commit: gone")
        if task.instance_id.endswith("ok"):
            return task.with_(FAIL_TO_PASS=("t::a",)), "ok"
        return None, "no test fails: x"


def _task(iid: str, base: str = "0" * 40) -> Task:
    return Task(instance_id=iid, repo="r", base_commit=base, problem_statement="p")


def _items() -> list[Candidate]:
    return [_task("1-ok"), _task("2"), Rejected("3", "swe", "no mirror: x"), _task("4-boom"),
            _task("5-ok"), _task("6-ok")]


def test_workers_give_the_same_outcomes_in_candidate_order() -> None:
    one = collect(SlowSource(_items()), log=lambda _m: None)
    source = SlowSource(_items())
    lines: list[str] = []
    two = collect(source, log=lines.append, workers=2)
    assert source.most == 2  # two candidates really were checked at once
    assert two.outcomes == one.outcomes and [t.instance_id for t in two.kept] == [
        "1-ok", "5-ok", "6-ok"]
    # logged as they finish: the slow first candidate is not the first line
    assert not lines[0].endswith("1-ok: kept (1 F2P, 0 P2P)")
    assert collect(SlowSource(_items()), 3, log=lambda _m: None, workers=2).tried == 3
    with pytest.raises(ValueError, match="--workers 0"):
        collect(SlowSource(_items()), workers=0)


def test_workers_stop_after_repeated_infrastructure_failures() -> None:
    class Broken(SlowSource):
        def check(self, task: Task) -> tuple[Task | None, str]:
            return None, "infrastructure: no docker"

    result = collect(Broken([_task(str(n)) for n in range(20)]), log=lambda _m: None, workers=2)
    assert result.stopped and "infrastructure" in result.stopped and result.tried <= 5


class Journal:
    def __init__(self, earlier: dict[str, tuple[dict[str, Any], Task | None]]) -> None:
        self.earlier_runs, self.recorded = earlier, []  # type: ignore[var-annotated]

    def earlier(self, instance_id: str) -> tuple[dict[str, Any], Task | None] | None:
        return self.earlier_runs.get(instance_id)

    def record(self, outcome: dict[str, Any], task: Task | None) -> None:
        self.recorded.append(outcome["instance_id"])


def test_a_journal_skips_what_an_earlier_run_finished() -> None:
    done = _task("1-ok").with_(FAIL_TO_PASS=("t::a",))
    journal = Journal({"1-ok": ({"instance_id": "1-ok", "kind": "swe", "kept": True,
                                 "reason": "ok"}, done)})
    source = SlowSource(_items())
    result = collect(source, log=lambda _m: None, journal=journal,
                     skip=lambda t: t.instance_id == "6-ok")
    assert result.resumed == 1 and result.skipped == 1 and result.tried == 5
    assert [t.instance_id for t in result.kept] == ["1-ok", "5-ok"]
    assert journal.recorded == ["2", "3", "4-boom", "5-ok"]  # not the resumed one


# ---------------------------------------------------------------------------- the folder


def test_a_folder_that_is_no_suite_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(OutputError, match="no suite"):
        SuiteFolder(tmp_path)
    with pytest.raises(OutputError, match="is a file"):
        SuiteFolder(tmp_path / "notes.txt")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "tasks.jsonl").write_text("{not json\n")
    with pytest.raises(OutputError, match="tasks.jsonl:1 is not a task"):
        SuiteFolder(tmp_path / "bad")
    SuiteFolder(tmp_path / "new")  # a new folder, or an empty one, is fine
    (tmp_path / "empty").mkdir()
    SuiteFolder(tmp_path / "empty")


def _repo(root: Path, commits: int) -> list[str]:
    git = ["git", "-c", "user.name=a", "-c", "user.email=a@b"]
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    shas = []
    for n in range(commits):
        (root / "a.py").write_text(f"X = {n}\n")
        subprocess.run(git + ["add", "-A"], cwd=root, check=True)
        subprocess.run(git + ["commit", "-qm", f"c{n}"], cwd=root, check=True)
        shas.append(subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                                   text=True, check=True).stdout.strip())
    return shas


def test_a_suite_grows_without_rewriting_a_line(tmp_path: Path) -> None:
    shas = _repo(tmp_path / "src", 3)
    out = tmp_path / "suite"
    first = SuiteFolder(out, {"seed": 0})
    first.begin()
    tasks = [_task("a", shas[0]).with_(source=str(tmp_path / "src")),
             _task("b", shas[1]).with_(source=str(tmp_path / "src"))]
    written = first.write(tasks, True, {"run": 1}, finished=True)
    assert written["added"] == 2 and not (out / PROGRESS).exists()
    before = (out / "tasks.jsonl").read_text()

    second = SuiteFolder(out, {"seed": 0})
    assert second.skip(tasks[0]) and not second.skip(_task("a", shas[2]))
    again = [tasks[0], _task("a", shas[2]).with_(source=str(tmp_path / "src")),
             _task("c", shas[2]).with_(source=str(tmp_path / "src"))]
    written = second.write(again, True, {"run": 2}, finished=True)
    assert written["added"] == 2 and written["renamed"] == {"a": "a-2"}
    after = (out / "tasks.jsonl").read_text()
    assert after.startswith(before)  # the earlier lines, byte for byte
    suite = load_suite(out)
    assert [t.instance_id for t in suite] == ["a", "b", "a-2", "c"]
    # one copy of the repository serves every task
    assert {t.source for t in suite} == {str((out / "repos" / "src").resolve())}
    assert json.loads((out / "report.json").read_text())["suite"]["total"] == 4
    assert json.loads((out / "report-1.json").read_text())["run"] == 1


def test_progress_resumes_only_the_same_configuration(tmp_path: Path) -> None:
    out = tmp_path / "suite"
    folder = SuiteFolder(out, {"seed": 0, "common": {"max_candidates": 3}})
    folder.begin()
    done = _task("1-ok").with_(FAIL_TO_PASS=("t::a",))
    folder.record({"instance_id": "1-ok", "kind": "swe", "kept": True, "reason": "ok"}, done)
    folder.record({"instance_id": "2", "kind": "swe", "kept": False, "reason": "x"}, None)
    with open(out / PROGRESS, "a") as f:
        f.write('{"outcome": {"instance_id": "3"')  # the line being written at a kill
    # --max (and --workers) may change between the two runs; anything else may not
    resumed = SuiteFolder(out, {"seed": 0, "common": {"max_candidates": 10}})
    earlier = resumed.earlier("1-ok")
    assert earlier is not None and earlier[1] == done
    assert resumed.earlier("2") is not None and resumed.earlier("3") is None
    with pytest.raises(OutputError, match="another configuration"):
        SuiteFolder(out, {"seed": 1})


# ---------------------------------------------------------------------------- the command


def _history(root: Path, n: int) -> Path:
    """A repository whose ``n`` commits each change code and a test."""
    git = ["git", "-c", "user.name=a", "-c", "user.email=a@b"]
    (root / "tests").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for i in range(n + 1):
        (root / "lib.py").write_text(f"def f():\n    return {i}\n")
        (root / "tests" / "test_lib.py").write_text(
            f"from lib import f\n\n\ndef test_f():\n    assert f() == {i}\n")
        subprocess.run(git + ["add", "-A"], cwd=root, check=True)
        subprocess.run(git + ["commit", "-qm", f"f returns {i}"], cwd=root, check=True)
    return root


class Stop(Exception):
    pass


@pytest.fixture()
def fake_checks(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The checks of ``tasks add`` replaced by one that keeps every candidate (these tests
    are about the folder and the progress file; the Docker tests check candidates)."""
    import contextlib

    from repogym.scripts import tasks_add

    state: dict[str, Any] = {"checked": [], "interrupt_at": None, "reject": False}

    def derive(task: Task) -> tuple[Task | None, str]:
        if len(state["checked"]) == state["interrupt_at"]:
            raise KeyboardInterrupt
        state["checked"].append(task.instance_id)
        if state["reject"]:
            return None, "setup fails: the index could not be reached"
        return task.with_(FAIL_TO_PASS=("tests/test_lib.py::test_f",)), "ok"

    @contextlib.contextmanager
    def checker(args: Any, check: Any) -> Iterator[Any]:
        yield derive, dict, None

    monkeypatch.setattr(tasks_add, "_checker", checker)
    monkeypatch.setattr(tasks_add, "docker_available", lambda: True)
    return state


def test_an_interrupted_run_resumes_and_a_second_run_adds_only_what_is_new(
        tmp_path: Path, fake_checks: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    from repogym.scripts.cli import main

    repo = _history(tmp_path / "proj", 5)
    out = tmp_path / "suite"
    command = ["tasks", "add", "git", str(repo), "--out", str(out), "--max", "4",
               "--no-gold-cases", "--no-certify"]
    fake_checks["interrupt_at"] = 2
    assert main(command) == 130
    assert len(load_suite(out)) == 2 and (out / PROGRESS).exists()
    assert "run the same command again" in capsys.readouterr().err

    fake_checks["interrupt_at"] = None
    assert main(command) == 0
    printed = capsys.readouterr()
    assert "2 taken from the progress file" in printed.out
    assert "(from the progress file)" in printed.err
    suite = load_suite(out)
    assert len(suite) == 4 and len({t.instance_id for t in suite}) == 4
    assert len(fake_checks["checked"]) == 4  # the first two were not checked again
    assert not (out / PROGRESS).exists()

    # again: the four in the suite are skipped unchecked, --max counts new candidates only
    assert main(command) == 0
    assert "4 already in the suite" in capsys.readouterr().out
    assert len(load_suite(out)) == 5 and len(fake_checks["checked"]) == 5
    assert main(command) == 0  # every commit is in the suite now
    assert "nothing new to try" in capsys.readouterr().err
    assert len(load_suite(out)) == 5 and len(fake_checks["checked"]) == 5


def test_a_run_that_kept_nothing_can_be_run_again_into_the_same_folder(
        tmp_path: Path, fake_checks: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    """#35: a failed run left an empty tasks.jsonl, and the next run refused the folder
    ('holds files but no suite')."""
    from repogym.scripts.cli import main

    repo = _history(tmp_path / "proj", 2)
    out = tmp_path / "suite"
    command = ["tasks", "add", "git", str(repo), "--out", str(out), "--no-gold-cases",
               "--no-certify"]
    fake_checks["reject"] = True
    assert main(command) == 1
    assert "no candidate survived" in capsys.readouterr().err
    fake_checks["reject"] = False  # the cause fixed (a CA bundle set, say): the same command
    assert main(command) == 0, capsys.readouterr().err
    assert len(load_suite(out)) == 2


def test_a_progress_file_of_another_run_is_refused(
        tmp_path: Path, fake_checks: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    from repogym.scripts.cli import main

    repo = _history(tmp_path / "proj", 3)
    out = tmp_path / "suite"
    fake_checks["interrupt_at"] = 1
    command = ["tasks", "add", "git", str(repo), "--out", str(out), "--no-gold-cases",
               "--no-certify"]
    assert main(command) == 130
    fake_checks["interrupt_at"] = None
    assert main([*command, "--seed", "7"]) == 2
    err = capsys.readouterr().err
    assert "another configuration" in err and err.count("repogym: error:") == 1


# ---------------------------------------------------------------------------- Ray's copies


def test_a_ray_worker_gets_the_repository_once_and_each_later_commit_alone(
        tmp_path: Path) -> None:
    from repogym.tasks.ray_checking import Shipper, _Actor
    from repogym.tasks.sources.common import WorkRepo

    shas = _repo(tmp_path / "src", 2)
    work = WorkRepo.create(tmp_path / "src", tmp_path / "work")
    shipper = Shipper()
    whole = shipper.whole(work.path)
    assert shipper.extra(work.path, shas[0]) is None  # in the whole bundle already
    later = work.commit_files({"a.py": "X = 99\n"}, "a candidate", "synthetic/abc")
    extra = shipper.extra(work.path, later)
    assert extra is not None and len(extra) < len(whole)
    actor = _Actor.__new__(_Actor)  # its checker is not needed to receive repositories
    actor.folder, actor.repos = tmp_path / "actor", {}
    actor.folder.mkdir()
    copy = actor._repository("src", whole, None)
    assert subprocess.run(["git", "cat-file", "-t", later], cwd=copy,
                          capture_output=True).returncode != 0
    assert actor._repository("src", whole, extra) == copy
    show = subprocess.run(["git", "show", f"{later}:a.py"], cwd=copy, capture_output=True,
                          text=True, check=True)
    assert show.stdout == "X = 99\n"


def test_an_unforeseen_error_ends_its_candidate_not_the_run() -> None:
    """more-itertools with two workers: a SystemError from CPython's parser in one candidate's
    check ended `tasks add` and the 15 candidates after it. It is that candidate's
    infrastructure rejection (tried again by the next run: no journal entry); the others go on."""
    class Faulty(SlowSource):
        def check(self, task: Task) -> tuple[Task | None, str]:
            if task.instance_id == "2":
                raise SystemError("AST constructor recursion depth mismatch (before=51, after=58)")
            return super().check(task)

    lines: list[str] = []
    journal = Journal({})
    result = collect(Faulty(_items()), log=lines.append, workers=2, journal=journal)
    assert result.stopped is None and result.tried == len(_items())
    assert [t.instance_id for t in result.kept] == ["1-ok", "5-ok", "6-ok"]
    (faulty,) = [o for o in result.outcomes if o["instance_id"] == "2"]
    assert faulty["reason_kind"] == "infrastructure" and faulty["reason"].startswith(
        "infrastructure: unexpected SystemError: AST constructor recursion depth mismatch")
    assert "2" not in journal.recorded and "4-boom" in journal.recorded
    assert any("unexpected SystemError" in line and "raise SystemError" in line
               for line in lines)


def test_an_unforeseen_error_is_logged_where_repogym_met_it() -> None:
    """The log showed the last three lines of the traceback: a library's frames (json's
    decoder), not the line of repogym that called it."""
    import json

    from repogym.tasks.sources.loop import _where

    def read_report() -> object:
        return json.loads("{")

    try:
        read_report()
    except ValueError as exc:
        where = _where(exc)
    assert "read_report" in where and 'json.loads("{")' in where
    assert "decoder.py" not in where and where.endswith("(char 1)")
