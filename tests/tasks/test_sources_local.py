"""Sources end to end, with candidates checked by running pytest on this machine.

The deriver here stands in for Docker (test_sources_cli.py runs the Docker path): it measures
FAIL_TO_PASS and PASS_TO_PASS the same way, so what is under test is each source's own work:
which candidates it makes, in which order, and what it keeps.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from repogym.repo import export_tree
from repogym.schema import Environment, Task
from repogym.tasks.sources.common import SourceOptions, WorkRepo
from repogym.tasks.sources.git import GitOptions, GitSource
from repogym.tasks.sources.loop import collect
from repogym.tasks.sources.replication import ReplicationOptions, ReplicationSource
from repogym.tasks.sources.synthetic import SyntheticOptions, SyntheticSource, failure_summary

pytestmark = pytest.mark.slow

STATS = textwrap.dedent('''\
    """Small statistics."""


    def mean(values):
        """The arithmetic mean; 0 for no values."""
        if not values:
            return 0
        return sum(values) / len(values)


    def clamp(x, low, high):
        """Clamp ``x`` into [low, high]."""
        if x < low:
            return low
        return min(x, high)


    def unused(a):
        b = a * 2
        return b + 1
    ''')
TESTS = textwrap.dedent('''\
    from stats import clamp, mean


    def test_mean():
        assert mean([1, 2, 3]) == 2


    def test_mean_empty():
        assert mean([]) == 0


    def test_clamp():
        assert clamp(5, 0, 3) == 3
        assert clamp(-1, 0, 3) == 0
    ''')


def run_pytest(tree: Path) -> str:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-rA", "-q", "-p", "no:cacheprovider"], cwd=tree,
        capture_output=True, text=True, env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
    ).stdout


def statuses(log: str) -> dict[str, str]:
    return {name: status for status, name in
            re.findall(r"^(PASSED|FAILED|ERROR) (\S+)", log, flags=re.M)}


def checkout(task: Task, patch: str, dest: Path) -> Path:
    export_tree(task.source or "", task.base_commit, dest)
    for diff in (task.test_patch, patch):
        if diff.strip():
            subprocess.run(["git", "apply", "-"], cwd=dest, input=diff.encode(), check=True)
    return dest


def local_derive(task: Task) -> tuple[Task | None, str]:
    with tempfile.TemporaryDirectory() as tmp:
        before = statuses(run_pytest(checkout(task, "", Path(tmp) / "before")))
        after = statuses(run_pytest(checkout(task, task.patch, Path(tmp) / "after")))
    f2p = sorted(t for t, s in after.items() if s == "PASSED" and before.get(t) != "PASSED")
    p2p = sorted(t for t, s in after.items() if s == "PASSED" and before.get(t) == "PASSED")
    if not f2p:
        return None, "no test fails before the patch and passes after it"
    return task.with_(FAIL_TO_PASS=tuple(f2p), PASS_TO_PASS=tuple(p2p)), "ok"


def local_failure_log(task: Task) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        return failure_summary(run_pytest(checkout(task, "", Path(tmp) / "t")), task.FAIL_TO_PASS)


@pytest.fixture()
def work(tmp_path: Path) -> WorkRepo:
    root = tmp_path / "stats"
    (root / "tests").mkdir(parents=True)
    (root / "stats.py").write_text(STATS)
    (root / "tests" / "test_stats.py").write_text(TESTS)
    return WorkRepo.create(root, tmp_path / "work")


def test_replication_keeps_what_the_tests_catch(work: WorkRepo) -> None:
    options = ReplicationOptions(work.path, min_lines=2)
    source = ReplicationSource(work, options, SourceOptions(), Environment(),
                               derive=local_derive, log=lambda _m: None)
    result = collect(source, log=lambda _m: None)
    assert result.tried == 3 and len(result.kept) == 2
    by_name = {t.reference["qualname"]: t for t in result.kept if t.reference}
    assert by_name["clamp"].FAIL_TO_PASS == ("tests/test_stats.py::test_clamp",)
    assert by_name["mean"].FAIL_TO_PASS == ("tests/test_stats.py::test_mean",
                                            "tests/test_stats.py::test_mean_empty")
    assert by_name["mean"].PASS_TO_PASS == ("tests/test_stats.py::test_clamp",)
    # code no test runs is rejected, and tried last: what the tests name comes first
    assert result.reasons == {"no fail-to-pass test": 1}
    assert "-replication-unused-" in result.outcomes[-1]["instance_id"]


def test_synthetic_bugs_break_a_test_and_statements_show_the_failure(work: WorkRepo) -> None:
    options = SyntheticOptions(work.path, operators=("flip_comparison", "remove_early_return"))
    source = SyntheticSource(work, options, SourceOptions(seed=1), Environment(),
                             derive=local_derive, log=lambda _m: None,
                             failure_log=local_failure_log)
    result = collect(source, log=lambda _m: None)
    # x < low -> x <= low changes nothing the tests see; both guards are needed
    assert result.tried == 3 and len(result.kept) == 2
    assert {t.extra["operator"] for t in result.kept} == {"remove_early_return"}
    for task in result.kept:
        assert task.kind == "synthetic" and task.FAIL_TO_PASS and task.PASS_TO_PASS
        assert task.reference and task.reference["source"].startswith("def ")
        for test in task.FAIL_TO_PASS:
            assert f"FAILED {test}" in task.problem_statement
        assert task.patch.count("\n-") == 1 or task.extra["operator"] == "remove_early_return"
    again = SyntheticSource(work, options, SourceOptions(seed=1), Environment(),
                            derive=local_derive, log=lambda _m: None)
    assert [m.key for m in again.mutations()] == [m.key for m in source.mutations()]


def test_git_mining_measures_the_lists(tmp_path: Path) -> None:
    repo = tmp_path / "proj"
    (repo / "tests").mkdir(parents=True)
    git = ["git", "-c", "user.name=a", "-c", "user.email=a@b"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "stats.py").write_text(STATS.replace("return min(x, high)", "return x"))
    (repo / "tests" / "test_stats.py").write_text(TESTS.split("def test_clamp")[0])
    subprocess.run(git + ["add", "-A"], cwd=repo, check=True)
    subprocess.run(git + ["commit", "-qm", "start"], cwd=repo, check=True)
    (repo / "stats.py").write_text(STATS)
    (repo / "tests" / "test_stats.py").write_text(TESTS)
    subprocess.run(git + ["commit", "-qam", "clamp the upper bound too"], cwd=repo, check=True)
    source = GitSource(GitOptions(repo), SourceOptions(), derive=local_derive,
                       log=lambda _m: None)
    result = collect(source, log=lambda _m: None)
    (task,) = result.kept
    assert task.FAIL_TO_PASS == ("tests/test_stats.py::test_clamp",)
    assert task.PASS_TO_PASS == ("tests/test_stats.py::test_mean",
                                 "tests/test_stats.py::test_mean_empty")
    assert task.problem_statement == "clamp the upper bound too"
