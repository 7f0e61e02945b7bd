"""Shared source pieces: test-file rules, the working repository, the candidate loop."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from repogym.errors import TaskError
from repogym.schema import Task
from repogym.tasks.sources import heartbeat
from repogym.tasks.sources.common import (
    Candidate,
    Rejected,
    SourceOptions,
    WorkRepo,
    interleave,
    is_test_path,
    reason_kind,
    repo_name,
    split_paths,
)
from repogym.tasks.sources.loop import collect


@pytest.mark.parametrize("path", [
    "tests/test_x.py", "test/data/input.json", "pkg/tests/helpers.py", "test_top.py",
    "pkg/io_test.py", "conftest.py", "src/pkg/conftest.py", "pytest.ini", "testing/util.py",
    "e2e/flow.py", "property_tests.py", "pkg/unit_tests.py",
])
def test_test_paths(path: str) -> None:
    assert is_test_path(path)


@pytest.mark.parametrize("path", [
    "pkg/core.py", "src/pkg/testament.py", "pkg/contest.py", "README.md", "setup.py",
    "docs/testing.rst", "pkg/latest.py", "tox.ini", "pkg/contests.py", "pkg/attests.py",
])
def test_non_test_paths(path: str) -> None:
    assert not is_test_path(path)


def test_split_paths_sorts_and_dedups() -> None:
    code, tests = split_paths(["b.py", "tests/t.py", "a.py", "a.py", "conftest.py"])
    assert code == ["a.py", "b.py"]
    assert tests == ["conftest.py", "tests/t.py"]


def test_options_say_what_to_fix() -> None:
    with pytest.raises(ValueError, match="--max"):
        SourceOptions(max_candidates=0)
    with pytest.raises(ValueError, match="--split"):
        SourceOptions(split="dev")
    with pytest.raises(ValueError, match="--runs"):
        SourceOptions(runs=0)


def test_reasons_are_grouped_by_kind_not_by_their_first_colon() -> None:
    assert reason_kind("patch too large: 3000 lines") == reason_kind("patch too large: 12 lines")
    # details without a colon, or with colons of their own, are no kind of their own
    assert {reason_kind(f"gold patch touches test paths {p}") for p in ("['a']", "['b']")} == {
        "gold patch touches tests"}
    assert reason_kind("gold does not resolve it (failing: ['t::a'], invalid: [])") == \
        reason_kind("gold does not resolve it (failing: [], invalid: ['19 expected tests'])") \
        == "gold does not resolve"
    assert reason_kind("tests not collected with the gold patch (the package does not "
                       "import?): E ImportError") == "tests not collected"
    # one prefix, different reasons: kept apart
    infra = ["infrastructure: No Docker engine answers (gone)",
             "infrastructure: building repogym/repo:x-1 failed (exit 1) at 'finish'",
             "infrastructure: building repogym/repo:x-2: setup exited 0 but did not install "
             "what it asked for: six (not installed)"]
    assert [reason_kind(r) for r in infra] == [
        "no Docker engine", "image build fails", "setup installs nothing"]
    assert reason_kind("leak: the image already holds the gold code: /a.py::f") == "leak"
    assert reason_kind("something new [3 of 4]: x") == "something new"


def _folder(root: Path) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "a.py").write_text("X = 1\n")
    script = root / "run.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o755)
    return root


def test_work_repo_from_a_plain_folder(tmp_path: Path) -> None:
    source = _folder(tmp_path / "src")
    (source / ".gitignore").write_text(".venv/\n")
    (source / ".venv").mkdir()
    (source / ".venv" / "big.py").write_text("")
    work = WorkRepo.create(source, tmp_path / "work")
    assert work.files() == [".gitignore", "pkg/a.py", "run.sh"]
    assert work.read_text("pkg/a.py") == "X = 1\n"
    assert work.name == "src"


def test_candidate_commits_are_deterministic_and_keep_modes(tmp_path: Path) -> None:
    source = _folder(tmp_path / "src")
    ids = []
    for n in range(2):
        work = WorkRepo.create(source, tmp_path / f"work{n}")
        commit = work.commit_files({"pkg/a.py": "X = 2\n", "run.sh": "#!/bin/sh\n"}, "m", "c/1")
        ids.append(commit)
        shown = subprocess.run(["git", "show", f"{commit}:pkg/a.py"], cwd=work.path,
                               capture_output=True, text=True, check=True).stdout
        assert shown == "X = 2\n"
        assert (work.path / "pkg" / "a.py").read_text() == "X = 1\n"  # checkout untouched
        mode = subprocess.run(["git", "ls-tree", commit, "run.sh"], cwd=work.path,
                              capture_output=True, text=True, check=True).stdout.split()[0]
        assert mode == "100755"
        assert "-X = 2" in work.diff(commit, work.head)
    assert ids[0] == ids[1]


def test_keep_only_drops_the_other_candidates(tmp_path: Path) -> None:
    work = WorkRepo.create(_folder(tmp_path / "src"), tmp_path / "work")
    keep = work.commit_files({"pkg/a.py": "X = 2\n"}, "keep", "c/keep")
    drop = work.commit_files({"pkg/a.py": "X = 3\n"}, "drop", "c/drop")
    work.keep_only([keep])
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(work.path), str(clone)], check=True)
    def has(commit: str) -> bool:
        return subprocess.run(["git", "cat-file", "-e", commit], cwd=clone).returncode == 0
    assert has(keep) and not has(drop)


def test_work_repo_refuses_a_missing_source(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match="does not exist"):
        WorkRepo.create(tmp_path / "nope", tmp_path / "work")


def test_repo_name_reads_the_origin_remote(tmp_path: Path) -> None:
    repo = tmp_path / "checkout"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    assert repo_name(repo) == "checkout"
    subprocess.run(["git", "remote", "add", "origin", "git@github.com:octo/widget.git"],
                   cwd=repo, check=True)
    assert repo_name(repo) == "octo/widget"
    mirror = tmp_path / "more-itertools+more-itertools" / "repo"
    subprocess.run(["git", "init", "-q", "--bare", str(mirror)], check=True)
    assert repo_name(mirror) == "more-itertools/more-itertools"


class ListSource:
    """A source over a fixed list; ``check`` keeps tasks whose id ends in "ok"."""

    name = "list"

    def __init__(self, items: list[Candidate], reason: str = "no test fails: x") -> None:
        self.items, self.reason, self.checked = items, reason, 0

    def candidates(self) -> Iterator[Candidate]:
        yield from self.items

    def check(self, task: Task) -> tuple[Task | None, str]:
        self.checked += 1
        if task.instance_id.endswith("boom"):
            raise TaskError("bad commit: gone")
        if task.instance_id.endswith("ok"):
            return task.with_(FAIL_TO_PASS=("t::a",)), "ok"
        return None, self.reason


def _task(iid: str) -> Task:
    return Task(instance_id=iid, repo="r", base_commit="0" * 40, problem_statement="p")


def test_collect_counts_kept_rejected_and_reasons() -> None:
    items: list[Candidate] = [_task("1-ok"), _task("2"), Rejected("3", "swe", "no mirror: x"),
                              _task("4-boom"), _task("5-ok"), _task("6")]
    lines: list[str] = []
    result = collect(ListSource(items), max_candidates=None, log=lines.append)
    assert result.tried == 6 and len(result.kept) == 2
    assert result.reasons == {"no test fails": 2, "no mirror": 1, "bad commit": 1}
    assert [o.get("reason_kind") for o in result.outcomes] == [
        None, "no test fails", "no mirror", "bad commit", None, "no test fails"]
    assert "tried 6, kept 2, rejected 4" in result.summary()
    assert len(lines) == 7 and lines[0].startswith("list: checking candidates one at a time")
    assert "[1/?] list 1-ok: kept (1 F2P, 0 P2P)" == lines[1]
    report = result.to_dict()
    assert report["candidates"][1] == {"instance_id": "2", "kind": "swe", "kept": False,
                                       "reason": "no test fails: x",
                                       "reason_kind": "no test fails"}


def test_collect_stops_at_max_and_after_repeated_infrastructure_failures() -> None:
    source = ListSource([_task(str(n)) for n in range(10)])
    assert collect(source, max_candidates=4, log=lambda _m: None).tried == 4
    broken = ListSource([_task(str(n)) for n in range(10)], reason="infrastructure: no docker")
    result = collect(broken, log=lambda _m: None)
    assert result.tried == 3 and broken.checked == 3
    assert result.stopped is not None and "infrastructure" in result.stopped


def test_collect_stops_once_enough_are_kept_and_max_still_bounds_the_tries() -> None:
    items = [_task(f"{n}-ok" if n % 3 == 0 else str(n)) for n in range(12)]  # 0, 3, 6, 9 pass
    lines: list[str] = []
    source = ListSource(items)
    result = collect(source, keep=2, log=lines.append)
    assert [t.instance_id for t in result.kept] == ["0-ok", "3-ok"]
    assert result.tried == 4 and source.checked == 4
    assert "list: 2 kept, no more candidates tried (--keep)" in lines
    assert collect(ListSource(items), max_candidates=5, keep=3, log=lambda _m: None).tried == 5
    assert len(collect(ListSource(items), keep=9, log=lambda _m: None).kept) == 4  # ran out
    threaded = collect(ListSource(items), keep=2, workers=2, log=lambda _m: None)
    assert len(threaded.kept) == 2 and threaded.tried == 4
    with pytest.raises(ValueError, match="--keep 0"):
        collect(ListSource(items), keep=0)


class InterruptedSource(ListSource):
    """Ctrl-C arrives while the third candidate is being checked."""

    def check(self, task: Task) -> tuple[Task | None, str]:
        if self.checked == 2:
            raise KeyboardInterrupt
        return super().check(task)


def test_an_interrupt_keeps_what_was_checked() -> None:
    lines: list[str] = []
    source = InterruptedSource([_task("1-ok"), _task("2"), _task("3-ok"), _task("4-ok")])
    result = collect(source, log=lines.append)
    assert [t.instance_id for t in result.kept] == ["1-ok"] and result.tried == 2
    assert result.stopped == "interrupted after 2 candidates"
    assert "writing the 1 tasks kept so far" in lines[-1]


class SlowSource(ListSource):
    """A check that takes a while, as an image build does."""

    def check(self, task: Task) -> tuple[Task | None, str]:
        time.sleep(0.35)
        return super().check(task)


def test_a_long_check_reports_while_it_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(heartbeat, "EVERY", 0.1)
    monkeypatch.setattr(heartbeat, "phase", lambda _task: "building its image")
    lines: list[str] = []
    collect(SlowSource([_task("1-ok")]), log=lines.append)
    beats = [line for line in lines if "still working" in line]
    assert len(beats) >= 2, lines
    assert beats[0].startswith("  [1/?] list 1-ok: still working (") and \
        beats[0].endswith("s: building its image)")
    assert lines[-1] == "[1/?] list 1-ok: kept (1 F2P, 0 P2P)"  # no beat after the verdict


def test_interleave_is_round_robin() -> None:
    a: list[Candidate] = [_task("a1"), _task("a2"), _task("a3")]
    b: list[Candidate] = [_task("b1")]
    got = [t.instance_id for t in interleave([iter(a), iter(b)])]
    assert got == ["a1", "b1", "a2", "a3"]


def test_the_pass_hook_setting_reads_and_hashes_as_before_when_on() -> None:
    from repogym.schema import Environment

    on = Environment()
    assert "assertion_pass_hook" not in Task(
        instance_id="a__b-1", repo="a/b", base_commit="0" * 40, problem_statement="x",
        patch="", test_patch="").to_dict()["environment"]
    assert Environment.from_dict({"assertion_pass_hook": False}).assertion_pass_hook is False
    assert on.assertion_pass_hook is True
    with pytest.raises(TaskError, match="true or false"):
        Environment.from_dict({"assertion_pass_hook": "no"})
