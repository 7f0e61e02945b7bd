"""Grading containers reset in place for task creation: a run never sees an earlier run's
leftovers, and a container whose reset cannot be verified is not handed out again."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from repogym.envs.grading.box import GradingBox
from repogym.envs.grading.grader import Grader, GraderConfig
from repogym.envs.grading.recycle import reset_grader
from repogym.repo import snapshot_commit
from repogym.sandbox.docker import DockerSandbox
from repogym.sandbox.pool import SandboxPool
from repogym.schema import Task

# A test that fails when it finds what an earlier run could have left, then leaves all of it:
# files in every writable place, a process, a System V shared memory segment.
LEAVES = textwrap.dedent('''\
    import ctypes, os, subprocess

    PLACES = ["/tmp/left", "/var/tmp/left", "/dev/shm/left", "/home/repogym/left",
              "/testbed/calc/left.py", "/opt/repogym-grade/out/left"]


    def test_nothing_left_then_leave_everything():
        found = [p for p in PLACES if os.path.exists(p)]
        procs = subprocess.run(["pgrep", "-f", "sleep 4242"], capture_output=True, text=True)
        ipcs = subprocess.run(["ipcs", "-m"], capture_output=True, text=True).stdout
        for path in PLACES:
            try:
                with open(path, "w") as f:
                    f.write("x")
            except OSError:
                pass
        subprocess.Popen(["setsid", "sleep", "4242"], start_new_session=True)
        ctypes.CDLL(None).shmget(4242, 4096, 0o1666)
        assert not found, found
        assert not procs.stdout.strip(), procs.stdout
        assert "0x00001092" not in ipcs, ipcs
    ''')


@pytest.fixture(scope="module")
def leaving(tmp_path_factory: pytest.TempPathFactory) -> tuple[Task, str]:
    from repogym.images.repository import ensure_image

    root = tmp_path_factory.mktemp("leaves") / "calc"
    (root / "calc").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "calc" / "__init__.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "tests" / "test_leaves.py").write_text(LEAVES)
    task = Task(instance_id="leaves", repo="toy/leaves", base_commit=snapshot_commit(root),
                problem_statement="", source=str(root))
    return task, ensure_image(task, progress=lambda _m: None).tag


LEAVES_TEST = "tests/test_leaves.py::test_nothing_left_then_leave_everything"


def _grade_three_times(task: Task, image: str, pool: SandboxPool) -> list[str]:
    grader = Grader(GraderConfig(cleanup_async=False), pool=pool)
    try:
        return [grader.grade(task, "", image).statuses[LEAVES_TEST] for _ in range(3)]
    finally:
        pool.close()


@pytest.mark.docker
def test_a_reset_grading_container_shows_no_leftovers(leaving: tuple[Task, str]) -> None:
    task, image = leaving
    pool = SandboxPool(size=1, reset={"grader": reset_grader})
    assert _grade_three_times(task, image, pool) == ["PASSED"] * 3
    assert pool.stats["reused"] >= 2 and pool.stats["misses"] == 1  # one container, three runs


@pytest.mark.docker
def test_without_the_reset_the_leftovers_show(leaving: tuple[Task, str]) -> None:
    """The check above can fail: reused without a reset, the second run finds the first's."""
    task, image = leaving

    def keep(box: DockerSandbox) -> bool:
        assert isinstance(box, GradingBox)
        box.close_processes()  # new processes, nothing else reset
        box.start_processes(warm=True)
        return True

    pool = SandboxPool(size=1, reset={"grader": keep})
    assert _grade_three_times(task, image, pool)[1:] == ["FAILED", "FAILED"]


@pytest.mark.docker
def test_a_container_whose_reset_cannot_be_verified_is_removed(
        leaving: tuple[Task, str], tmp_path: Path) -> None:
    task, image = leaving
    pool = SandboxPool(size=1, reset={"grader": reset_grader})
    grader = Grader(GraderConfig(cleanup_async=False), pool=pool)
    try:
        box = pool.acquire(image, role="grader", **grader.container_config())
        box.read_only = False  # as if its root could be written: leftovers could be anywhere
        assert not reset_grader(box)
        box.read_only = True
        result = box.exec(["bash", "-c", "mkdir -p /dev/shm/x && touch /dev/shm/x/y"])
        assert result.exit_code == 0
        assert reset_grader(box)  # an ordinary reset empties it...
        assert box.exec(["ls", "-A", "/dev/shm"]).output.strip() == ""
        pool.release(box)
    finally:
        pool.close()
