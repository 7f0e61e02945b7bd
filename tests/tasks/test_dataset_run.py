"""`repogym swebench run`: every instance built, validated and graded by repogym and by
swebench's run_instance, resumable, with a report that lists every instance."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from repogym.scripts import swebench_cmd
from repogym.scripts.cli import main
from repogym.tasks.dataset_report import markdown, summarize
from repogym.tasks.dataset_run import RunOptions, State, needs, summary_line

GIT = ["git", "-c", "user.name=a", "-c", "user.email=a@b"]
PATCH = """\
diff --git a/app.py b/app.py
--- a/app.py
+++ b/app.py
@@ -1,2 +1,2 @@
 def add(a, b):
-    return a - b
+    return a + b
"""
TEST_PATCH = """\
diff --git a/tests/test_app.py b/tests/test_app.py
--- a/tests/test_app.py
+++ b/tests/test_app.py
@@ -3,3 +3,7 @@ from app import add
 
 def test_small():
     assert add(1, 1) == 2
+
+
+def test_big():
+    assert add(2, 3) == 5
"""


def _kept(iid: str, agreement: dict[str, Any]) -> dict[str, Any]:
    return {"instance_id": iid, "repo": "o/r", "verdict": "kept", "F2P": 1, "P2P": 2,
            "dropped": {}, "task": {}, "build": {"seconds": 10.0, "own_mb": 2.0, "cached": False,
                                                 "image": "repogym/repo:x"},
            "validate": {"seconds": 20.0}, "agreement": agreement}


def test_what_an_instance_still_needs(tmp_path: Path) -> None:
    file = tmp_path / "f.jsonl"
    file.write_text("")
    options = RunOptions(file=file, out=tmp_path, kinds=("gold", "empty"), retry=("no mirror",))
    assert needs(None, options) == "build"
    assert needs({"verdict": "error"}, options) == "build"  # infrastructure: again
    assert needs({"verdict": "rejected", "reason_kind": "setup fails"}, options) is None
    assert needs({"verdict": "rejected", "reason_kind": "no mirror"}, options) == "build"
    assert needs(_kept("a", {"gold": {}}), options) == "agree"
    assert needs(_kept("a", {"gold": {}, "empty": {}}), options) is None
    with pytest.raises(ValueError, match="agreement kinds"):
        RunOptions(file=file, out=tmp_path, kinds=("bogus",))


def test_the_report_lists_every_instance_and_counts_the_reasons() -> None:
    same = {"repogym": True, "swebench": True, "same": True}
    records = [
        _kept("o__r-1", {"gold": same, "drop_hunk": {"skipped": "one hunk"}}),
        _kept("o__r-2", {"gold": {"repogym": True, "swebench": False, "same": False}}),
        {"instance_id": "o__r-3", "repo": "o/r", "verdict": "rejected",
         "reason": "cannot build here: no conda", "reason_kind": "cannot build here"},
    ]
    summary = summarize(records, with_disk=False)
    assert (summary["kept"], summary["rejected"]) == (2, 1)
    assert summary["reasons"] == {"cannot build here": 1}
    assert summary["agreement"]["gold"]["compared"] == 2
    assert summary["agreement"]["gold"]["differ"]["o__r-2"]["swebench"] is False
    assert summary["costs"]["seconds"] == 60.0 and summary["costs"]["own_mb_median"] == 2.0
    text = markdown(summary, records)
    for line in ("| o__r-1 | kept (1 F2P, 2 P2P) |", "=R/R", "!R/-", "| . |",
                 "rejected: cannot build here: no conda", "| cannot build here | 1 |"):
        assert line in text, line
    assert summary_line(records[1]).startswith("o__r-2: kept (1 F2P, 2 P2P); build 10 s")


def _mirror(root: Path) -> str:
    subprocess.run(["git", "init", "-q", "--initial-branch=main", str(root)], check=True)
    (root / "tests").mkdir()
    (root / "app.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "tests" / "test_app.py").write_text(
        "from app import add\n\n\ndef test_small():\n    assert add(1, 1) == 2\n")
    subprocess.run(GIT + ["add", "-A"], cwd=root, check=True)
    subprocess.run(GIT + ["commit", "-qm", "base"], cwd=root, check=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                          text=True, check=True).stdout.strip()


@pytest.mark.docker
def test_a_dataset_run_keeps_grades_agrees_and_resumes(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    base = _mirror(tmp_path / "repos" / "octo__app")
    rows = [{"repo": repo, "instance_id": iid, "base_commit": base, "patch": PATCH,
             "test_patch": TEST_PATCH, "problem_statement": "add subtracts", "version": "1.0",
             "FAIL_TO_PASS": json.dumps(["tests/test_app.py::test_big"]),
             "PASS_TO_PASS": json.dumps(["tests/test_app.py::test_small"])}
            for repo, iid in (("octo/app", "octo__app-1"), ("nobody/gone", "nobody__gone-1"))]
    data = tmp_path / "lite.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = tmp_path / "env.yaml"
    env.write_text('"*":\n  "*":\n    python: "3.11"\n    test_cmd: python -m pytest -rA\n')
    out = tmp_path / "run"
    argv = ["swebench", "run", str(data), "--repos", str(tmp_path / "repos"), "--env",
            str(env), "--out", str(out), "--runs", "1", "--kinds", "gold,empty"]
    assert main(argv) == 0
    records = {r["instance_id"]: r for r in State(out).all()}
    kept, gone = records["octo__app-1"], records["nobody__gone-1"]
    assert kept["verdict"] == "kept", kept.get("reason")
    assert gone["verdict"] == "rejected" and gone["reason_kind"] == "no mirror"
    assert kept["agreement"]["gold"]["repogym"] is True
    assert kept["agreement"]["gold"]["swebench"] is True
    assert kept["agreement"]["empty"]["repogym"] is False
    assert kept["agreement"]["empty"]["swebench"] is False
    assert kept["build"]["own_mb"] >= 0 and kept["validate"]["seconds"] > 0
    suite = (out / "tasks.jsonl").read_text().splitlines()
    assert [json.loads(line)["instance_id"] for line in suite] == ["octo__app-1"]
    report = (out / "report.md").read_text()
    assert "| no mirror | 1 |" in report and "=R/R" in report
    # again: nothing to do; with a kind more, only that kind (the patch has one hunk: skipped)
    assert main([*argv[:-1], "gold,empty,drop_hunk"]) == 0
    again = State(out).read("octo__app-1")
    assert again is not None and again["finished_at"] == kept["finished_at"]
    assert again["agreement"]["drop_hunk"] == {"skipped": "the gold patch allows no such change"}
    err = capsys.readouterr().err
    assert "0 done already, 2 to do" in err and "1 done already, 1 to do" in err
    assert os.path.getsize(out / "report.json") > 0


def test_sigterm_stops_a_run_as_ctrl_c_does() -> None:
    """A run started in the background (nohup ... &) ignores SIGINT: SIGTERM and SIGINT both
    stop it as Ctrl-C does, the instances under way ending their stage."""
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    try:
        swebench_cmd._stop_gracefully()
        for signum in (signal.SIGTERM, signal.SIGINT):
            with pytest.raises(KeyboardInterrupt):
                os.kill(os.getpid(), signum)
                time.sleep(1)
    finally:
        signal.signal(signal.SIGTERM, before[0])
        signal.signal(signal.SIGINT, before[1])


def _dataset(tmp_path: Path, ids: tuple[int, ...] = (1, 2)) -> tuple[Path, Path]:
    """A Lite-like file of instances octo__app-N on one mirror, and an environment file."""
    base = _mirror(tmp_path / "repos" / "octo__app")
    rows = [{"repo": "octo/app", "instance_id": f"octo__app-{n}", "base_commit": base,
             "patch": PATCH, "test_patch": TEST_PATCH, "problem_statement": "add subtracts",
             "version": "1.0", "FAIL_TO_PASS": json.dumps(["tests/test_app.py::test_big"]),
             "PASS_TO_PASS": json.dumps(["tests/test_app.py::test_small"])} for n in ids]
    data = tmp_path / "lite.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = tmp_path / "env.yaml"
    env.write_text('"*":\n  "*":\n    python: "3.11"\n    test_cmd: python -m pytest -rA\n')
    return data, env


def test_an_unforeseen_error_ends_its_instance_not_the_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug met by one instance (astropy__astropy-14182: git's CalledProcessError) is recorded
    as that instance's error, which the next run tries again; the other instances go on."""
    from repogym.tasks import dataset_run

    data, env = _dataset(tmp_path)

    def build_and_validate(self: Any, task: Any, record: dict[str, Any]) -> None:
        if task.instance_id == "octo__app-1":
            raise subprocess.CalledProcessError(255, ["git", "archive"])
        self.finish(record, None, "setup fails on this snapshot: no")

    monkeypatch.setattr(dataset_run.DatasetRun, "build_and_validate", build_and_validate)
    options = RunOptions(file=data, out=tmp_path / "run", repos=tmp_path / "repos", env=env,
                         workers=2, kinds=())
    records = {r["instance_id"]: r for r in dataset_run.DatasetRun(
        options, log=lambda _m: None).run()}
    broken, other = records["octo__app-1"], records["octo__app-2"]
    assert broken["verdict"] == "error" and "unexpected CalledProcessError" in broken["reason"]
    assert other["verdict"] == "rejected" and other["reason_kind"] == "setup fails"
    assert needs(broken, options) == "build" and needs(other, options) is None


def test_a_run_folder_is_one_runs_and_a_limited_run_keeps_the_suite(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two runs in one folder validated the same instances at once and wrote over each
    other's records: the second is refused while the first holds the folder. A run limited
    to some instances (--instances) wrote tasks.jsonl from those alone, and the suite lost
    every other kept task."""
    from repogym.errors import UsageError
    from repogym.tasks import dataset_run

    data, env = _dataset(tmp_path)

    def build_and_validate(self: Any, task: Any, record: dict[str, Any]) -> Any:
        return self.finish(record, task, "ok")

    monkeypatch.setattr(dataset_run.DatasetRun, "build_and_validate", build_and_validate)
    out = tmp_path / "run"

    def options(*ids: str) -> RunOptions:
        return RunOptions(file=data, out=out, repos=tmp_path / "repos", env=env, kinds=(),
                          instances=ids)

    dataset_run.DatasetRun(options(), log=lambda _m: None).run()
    suite = [json.loads(line)["instance_id"] for line in (out / "tasks.jsonl").open()]
    assert suite == ["octo__app-1", "octo__app-2"]
    dataset_run.DatasetRun(options("octo__app-2"), log=lambda _m: None).run()
    suite = [json.loads(line)["instance_id"] for line in (out / "tasks.jsonl").open()]
    assert suite == ["octo__app-1", "octo__app-2"]
    (out / "tasks.jsonl").unlink()
    assert main(["swebench", "report", "--out", str(out), "--no-disk"]) == 0
    assert len((out / "tasks.jsonl").read_text().splitlines()) == 2  # the report writes it

    with State(out).held():  # another run in the folder
        with pytest.raises(UsageError, match=f"in use by a run still going on .process "
                                             f"{os.getpid()}"):
            dataset_run.DatasetRun(options(), log=lambda _m: None).run()
    dataset_run.DatasetRun(options(), log=lambda _m: None).run()  # free again


def test_a_difference_with_the_official_harness_validates_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """sympy__sympy-13146: its FAIL_TO_PASS test passed in both validation runs and failed in
    run_instance's; it fails in 6 runs of 10. A difference on gold or the empty patch has the
    task validated again with more runs: what flips leaves the lists, here every FAIL_TO_PASS
    test, so the instance is rejected as flaky. Where nothing flips, it stays, with the runs
    recorded, and is not validated again on the next run."""
    from repogym.tasks import dataset_run
    from repogym.tasks.validate import Validation

    data, env = _dataset(tmp_path)
    f2p = "tests/test_app.py::test_big"
    monkeypatch.setattr(dataset_run.DatasetRun, "build_and_validate",
                        lambda self, task, record: self.finish(record, task, "ok"))

    def grade_both(self: Any, task: Any, image: str, kind: str, patch: str) -> dict[str, Any]:
        differs = kind == "gold"  # run_instance failed gold
        return {"repogym": kind == "gold", "swebench": False, "same": not differs}

    monkeypatch.setattr(dataset_run.DatasetRun, "grade_both", grade_both)
    monkeypatch.setattr(dataset_run, "ensure_image", lambda *a, **k: type("B", (), {"tag": "t"}))
    checked: list[tuple[str, int]] = []

    def validate_task(task: Any, runs: int = 2, grader: Any = None) -> Validation:
        checked.append((task.instance_id, runs))
        if task.instance_id == "octo__app-2":  # nothing flips
            return Validation(task.instance_id, True, "ok", [True] * runs, [False] * runs, [],
                              1.0)
        flips = {f2p: {"gold": {"PASSED": 2, "FAILED": 2}, "empty": {"FAILED": 4}}}
        return Validation(task.instance_id, False, "gold does not resolve it; flaky tests",
                          [True, False, True, False], [False] * 4, [f2p], 1.0, flips)

    monkeypatch.setattr(dataset_run, "validate_task", validate_task)
    options = RunOptions(file=data, out=tmp_path / "run", repos=tmp_path / "repos", env=env,
                         kinds=("gold", "empty"))
    dataset_run.DatasetRun(options, log=lambda _m: None).run()
    flaky, steady = State(tmp_path / "run").read("octo__app-1"), State(tmp_path / "run").read(
        "octo__app-2")
    assert checked == [("octo__app-1", dataset_run.RECHECK_RUNS),
                       ("octo__app-2", dataset_run.RECHECK_RUNS)]
    assert flaky is not None and flaky["verdict"] == "rejected", flaky
    assert flaky["reason"].startswith("every FAIL_TO_PASS test is flaky (1: gold FAILED 2, "
                                      "PASSED 2 of 4 runs)")
    assert flaky["recheck"]["gold_resolved"] == 2 and flaky["recheck"]["flaky"] == [f2p]
    assert steady is not None and steady["verdict"] == "kept" and steady["recheck"][
        "gold_runs"] == dataset_run.RECHECK_RUNS
    suite = [json.loads(line)["instance_id"] for line in (tmp_path / "run/tasks.jsonl").open()]
    assert suite == ["octo__app-2"]
    records = State(tmp_path / "run").all()
    summary = summarize(records, with_disk=False)
    assert summary["agreement"]["gold"]["differ"]["octo__app-2"]["recheck"]["gold_resolved"] == 4
    assert "kept (1 F2P, 1 P2P; gold 4/4 validated again)" in markdown(summary, records)
    dataset_run.DatasetRun(options, log=lambda _m: None).run()  # done: no second recheck
    assert len(checked) == 2
