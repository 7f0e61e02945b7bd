"""Tests a project marks flaky leave a candidate's lists (repogym.tasks.sources.flaky_marks)."""

from __future__ import annotations

from pathlib import Path

from repogym.repo import git
from repogym.schema import Task
from repogym.tasks.sources.common import Rejected
from repogym.tasks.sources.flaky_marks import marked_scopes, without_marked
from repogym.tasks.sources.loop import collect

# zipp 4.1.2's tests/test_complexity.py, in short
COMPLEXITY = '''import pytest
from pytest import mark as m

flaky = pytest.mark.flaky

class TestComplexity:
    @pytest.mark.flaky
    def test_implied_dirs_performance(self):
        pass

    @flaky(reruns=3)
    def test_glob_depth(self, n):
        pass

    def test_plain(self):
        pass


@m.flaky(max_runs=2)
class TestWhole:
    def test_a(self):
        pass


def test_function():
    pass
'''
MARKED_MODULE = "import pytest\npytestmark = [pytest.mark.slow, pytest.mark.flaky]\n\n" \
    "def test_x():\n    pass\n"


def test_markers_on_a_test_its_class_or_its_module_are_read() -> None:
    assert marked_scopes(COMPLEXITY) == {("TestComplexity", "test_implied_dirs_performance"),
                                        ("TestComplexity", "test_glob_depth"), ("TestWhole",)}
    assert marked_scopes(MARKED_MODULE) == {()}
    assert marked_scopes("def broken(:\n") == set()


def _repo(root: Path) -> str:
    root.mkdir()
    (root / "tests").mkdir()
    (root / "tests" / "test_complexity.py").write_text(COMPLEXITY)
    (root / "tests" / "test_marked.py").write_text(MARKED_MODULE)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "tests")
    return git(root, "rev-parse", "HEAD").strip()


def task(root: Path, head: str, f2p: tuple[str, ...], p2p: tuple[str, ...]) -> Task:
    return Task(instance_id="zipp-1", repo="zipp", base_commit="0" * 40, problem_statement="",
                patch="", source=str(root), FAIL_TO_PASS=f2p, PASS_TO_PASS=p2p,
                extra={"original_commit": head})


def test_marked_tests_leave_the_lists_with_the_reason(tmp_path: Path) -> None:
    head = _repo(tmp_path / "zipp")
    glob = "tests/test_complexity.py::TestComplexity::test_glob_depth[3]"
    kept, _ = without_marked(task(tmp_path / "zipp", head, (
        "tests/test_complexity.py::test_function", glob), (
        "tests/test_complexity.py::TestComplexity::test_plain",
        "tests/test_complexity.py::TestWhole::test_a", "tests/test_marked.py::test_x")))
    assert kept is not None
    assert kept.FAIL_TO_PASS == ("tests/test_complexity.py::test_function",)
    assert kept.PASS_TO_PASS == ("tests/test_complexity.py::TestComplexity::test_plain",)
    dropped = kept.extra["dropped_tests"]
    assert set(dropped) == {glob, "tests/test_complexity.py::TestWhole::test_a",
                            "tests/test_marked.py::test_x"}
    assert all(r.startswith("flaky: marked so by its project") for r in dropped.values())
    gone, why = without_marked(task(tmp_path / "zipp", head, (glob,), ()))
    assert gone is None and "every FAIL_TO_PASS test is marked flaky" in why


class _Source:
    """Candidates checked as given (the loop under test drops the marked tests)."""

    def __init__(self, tasks: list[Task], published: bool) -> None:
        self.name, self.tasks, self.published_lists = "listed", tasks, published

    def candidates(self) -> list[Task | Rejected]:
        return list(self.tasks)

    def check(self, task: Task) -> tuple[Task | None, str]:
        return task, "ok"


def test_the_loop_drops_them_but_keeps_a_datasets_lists(tmp_path: Path) -> None:
    head = _repo(tmp_path / "zipp")
    glob = "tests/test_complexity.py::TestComplexity::test_glob_depth"
    made = task(tmp_path / "zipp", head, ("tests/test_complexity.py::test_function", glob), ())
    [kept] = collect(_Source([made], published=False), log=lambda _m: None).kept
    assert kept.FAIL_TO_PASS == ("tests/test_complexity.py::test_function",)
    [published] = collect(_Source([made], published=True), log=lambda _m: None).kept
    assert published.FAIL_TO_PASS == made.FAIL_TO_PASS
