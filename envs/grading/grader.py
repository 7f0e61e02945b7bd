"""The grader: a fresh container from the pristine image, the agent's diff without its test
changes, the task's test patch, canaries, one harness-owned test run, two cross-checked result
sources, and a verdict that only explicit passes can earn.

:class:`Grader` takes the container (from the pool, started ahead of time, or started now);
one run in it is a ``PytestRun`` (``pytest_run.py``) or, for the other languages' runners, a
``LangRun`` (``langrun.py``); what it saw and decided is a :class:`GradingReport`.

See the manual's "Grading and safety" (docs/safety.md) for what is defended and what is not.
"""

from __future__ import annotations

import random
import threading
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from repogym.envs.grading.box import TEST_ENV, GradingBox
from repogym.envs.grading.langrun import LangRun
from repogym.envs.grading.pytest_run import TEST_UID, PytestRun
from repogym.envs.grading.report import GradingReport, report_json
from repogym.envs.grading.runners import runner_name
from repogym.envs.grading.testcmd import test_files
from repogym.errors import GradingError, RepogymError
from repogym.sandbox.base import SandboxConfig
from repogym.sandbox.pool import SandboxPool
from repogym.schema import Task

# the names other modules take from here
__all__ = ["GRADER_CAPS", "TEST_ENV", "TEST_UID", "Grader", "GraderConfig", "GradingReport",
           "report_json", "test_files"]

GRADER_CAPS = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL")


@dataclass(frozen=True)
class GraderConfig:
    timeout: float | None = None  # seconds for the test run; the task's own when None
    memory: str = "4g"
    cpus: float = 2.0
    pids_limit: int = 1024
    log_limit: int = 4_000_000
    canaries: bool = True
    disguise: bool = True  # hidden tests under random names, then a decoy run (see blind.py)
    decoy_p2p: int = 3  # PASS_TO_PASS tests drawn at random into each grade's decoys
    # the decoy run collects while the test run goes on (in the second waiting pytest); off:
    # it runs whole after the test run, in that process or a new one
    decoy_overlap: bool = True
    reporter: bool = True  # results over a signed pipe, the equality check (reporter.py)
    cleanup_async: bool = True

    def __post_init__(self) -> None:
        if self.decoy_p2p < 0:
            raise ValueError(f"decoy_p2p={self.decoy_p2p}: give a count >= 0 (0: the decoys "
                             "hold the FAIL_TO_PASS tests alone)")


class Grader:
    """Grades patches; with a pool, its containers are started ahead of time."""

    def __init__(self, config: GraderConfig | None = None, seed: int | None = None,
                 pool: SandboxPool | None = None):
        self.config = config or GraderConfig()
        self.rng = random.Random(seed)
        self.pool = pool
        if pool is not None:  # the pool's grading containers come warm (runner, pytest)
            pool.kinds["grader"] = GradingBox.warmed

    def container_config(self) -> dict[str, Any]:
        config = self.config
        return {"network": False, "shell": False, "cap_add": GRADER_CAPS,
                "memory": config.memory, "cpus": config.cpus, "pids_limit": config.pids_limit,
                "output_limit": config.log_limit, "tmpfs_size": "512m"}

    def warm(self, image: str) -> None:
        """Starts a grading container for ``image`` in the background (with a pool)."""
        if self.pool is not None:
            self.pool.warm(image, role="grader", **self.container_config())

    def grade(self, task: Task, patch: str, image: str, tests: Sequence[str] = (),
              by_id: bool = False) -> GradingReport:
        """Grades ``patch``; with ``tests`` (pytest node ids), only those tests run (and the
        canaries) instead of the task's test files: task creation runs the few a change can
        reach. With ``by_id``, the test run keeps, of the test files, only the task's own ids,
        every defence on (certification grades an attack on the FAIL_TO_PASS tests so)."""
        report = GradingReport(task.instance_id, image=image, empty_patch=not patch.strip())
        start = time.monotonic()
        with report.timed("acquire"):
            box = self._acquire(image)
        try:
            run = PytestRun(self, task, box, report, tuple(tests), by_id)
            if runner_name(task.environment):  # JavaScript, Go, Rust, Java: ``langrun``
                LangRun(self, task, box, report, run.root, run.end_user).grade(patch)
            else:
                run.grade(patch)
        finally:
            report.total_seconds = time.monotonic() - start
            self._release(box)
        return report

    def _acquire(self, image: str) -> GradingBox:
        """A grading container of ``image``: the pool's, or one started now (no warm pytest:
        the tests run in a fresh process)."""
        if self.pool is None:
            return GradingBox(SandboxConfig(image=image, role="grader",
                                            **self.container_config()))
        box = self.pool.acquire(image, role="grader", **self.container_config())
        if not isinstance(box, GradingBox):
            self.pool.release(box)
            raise GradingError(f"the pool handed out a {type(box).__name__} as a grading "
                               "container: give each pool to one Grader, which sets its kind")
        return box

    def _release(self, box: GradingBox) -> None:
        if self.pool is not None:
            self.pool.release(box)  # removed, unless the pool resets graders (recycle)
        elif self.config.cleanup_async:
            threading.Thread(target=_close_quietly, args=(box,), daemon=True).start()
        else:
            box.close()


def _close_quietly(box: GradingBox) -> None:
    """Removes a grading container in the background. Should the engine be gone by then, the
    container stays on the list the process removes at exit: say so instead of a traceback."""
    try:
        box.close()
    except RepogymError as exc:
        warnings.warn(f"grading container {box.name} not removed yet: {exc}", stacklevel=1)
