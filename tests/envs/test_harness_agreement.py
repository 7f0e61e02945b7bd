"""repogym's grader and SWE-bench's own ``run_instance`` agree on every demo task.

``run_instance`` (swebench 5.x) takes a ``TestSpec`` that names its image directly and only
pulls when the engine lacks it, so it runs here on repogym's own image, with no registry
(:mod:`repogym.envs.grading.official` builds the spec; its eval script is SWE-bench's usual
one: reset the test files, apply the test patch, run the task's test command on its test files
between the output markers). Its containers get no network (:class:`NoNetworkClient`), as
repogym's do. The gold patch must resolve every task under both graders and the empty
prediction (``skip_patch``: SWE-bench's negative mode, which runs the tests on the untouched
base) must resolve none.

``test_submit_to_reward_latency`` times both graders on one task with the gold patch (median
of a few runs) and prints the numbers; run with ``-s`` to see them. repogym is timed cold (a
fresh grading container, as ``run_instance`` starts one) and warm (the container the
environment starts at reset); SWE-bench until its report exists and until ``run_instance``
returns (it then stops its container, at once with Docker's init).
"""

from __future__ import annotations

import json
import os
import statistics
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import docker
import pytest
from swebench.harness.constants import LOG_REPORT, RUN_EVALUATION_LOG_DIR
from swebench.harness.run_evaluation import run_instance

from repogym.envs.grading.grader import Grader, GraderConfig
from repogym.envs.grading.official import MODEL, make_spec
from repogym.images.repository import ensure_image
from repogym.sandbox.pool import SandboxPool
from repogym.schema import Task
from repogym.suite import load_suite

pytestmark = [pytest.mark.docker, pytest.mark.slow]

DEMO = {t.instance_id: t for t in load_suite("demo")}
RUNS = 3  # runs per grader for the latency median
WARM_WAIT = 5.0  # seconds an agent's episode gives the pool to start a grading container


class NoNetworkClient:
    """A Docker client whose new containers have no network, like repogym's grading ones.

    ``run_instance`` otherwise attaches its container to the engine's default bridge; the tests
    need no network, and an engine whose bridge is unusable (no ``docker0`` in nested or locked
    down hosts) could not run SWE-bench at all. Nothing else changes."""

    def __init__(self, client: docker.DockerClient):
        self._client = client
        self.containers = _NoNetworkContainers(client.containers)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


class _NoNetworkContainers:
    def __init__(self, inner: Any):
        self._inner = inner

    def create(self, *args: Any, **kwargs: Any) -> Any:
        # and Docker's init, as repogym's own client gives them (``official._Containers``):
        # run_instance's first process ignores docker stop's SIGTERM
        return self._inner.create(*args, **{**kwargs, "network_mode": "none", "init": True})

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def official(task: Task, image: str, patch: str | None) -> tuple[bool, float, float]:
    """SWE-bench's verdict from ``run_instance`` itself, the seconds until its report existed
    and until it returned; ``patch=None`` is the empty prediction in ``skip_patch`` mode.
    Relative log paths: the working folder must be ``logs_dir``'s."""
    run_id = f"agree-{uuid.uuid4().hex[:8]}"
    report_path = RUN_EVALUATION_LOG_DIR / run_id / MODEL / task.instance_id / LOG_REPORT
    pred = {"instance_id": task.instance_id, "model_name_or_path": MODEL,
            "model_patch": patch or ""}
    seen: list[float] = []
    done = threading.Event()

    def watch() -> None:  # the report is written before the container is stopped
        while not done.is_set() and not seen:
            if report_path.exists():
                seen.append(time.monotonic())
            time.sleep(0.01)

    watcher = threading.Thread(target=watch, daemon=True)
    start = time.monotonic()
    watcher.start()
    try:
        result = run_instance(make_spec(task, image), pred, NoNetworkClient(docker.from_env()),
                              run_id, timeout=600, skip_patch=patch is None)
    finally:
        total = time.monotonic() - start
        done.set()
        watcher.join()
    assert result is not None, f"run_instance failed: see {report_path.parent}/run_instance.log"
    resolved = bool(result[1][task.instance_id]["resolved"])
    return resolved, (seen or [start + total])[0] - start, total


def ours(task: Task, image: str, patch: str, grader: Grader | None = None) -> tuple[bool, float]:
    """repogym's verdict and seconds; a fresh grading container unless ``grader`` has a pool."""
    start = time.monotonic()
    report = (grader or Grader(GraderConfig())).grade(task, patch, image)
    return report.resolved, time.monotonic() - start


def warm_grade(task: Task, image: str, pool: SandboxPool) -> tuple[bool, float]:
    """What the environment's submit costs: its grading container was started at reset."""
    grader = Grader(GraderConfig(), pool=pool)
    grader.warm(image)
    time.sleep(WARM_WAIT)
    return ours(task, image, task.patch, grader)


@pytest.fixture(scope="module")
def images() -> dict[str, str]:
    return {i: ensure_image(t, progress=lambda _m: None).tag for i, t in DEMO.items()}


@pytest.fixture(scope="module")
def logs_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """run_instance writes its logs under ./logs: keep them out of the checkout."""
    folder = tmp_path_factory.mktemp("swebench")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(folder)
        yield folder


@pytest.fixture(scope="module")
def verdicts(images: dict[str, str], logs_dir: Path) -> dict[tuple[str, str], tuple[bool, bool]]:
    """(task id, "gold" | "empty") -> (repogym resolved, SWE-bench resolved)."""
    jobs = [(i, kind) for i in DEMO for kind in ("gold", "empty")]

    def one(job: tuple[str, str]) -> tuple[bool, bool]:
        task_id, kind = job
        task, image = DEMO[task_id], images[task_id]
        patch = task.patch if kind == "gold" else ""
        return ours(task, image, patch)[0], official(task, image, patch or None)[0]

    # run_instance waits on Docker (a container made, started, stopped), so threads help; they
    # share the working folder that logs_dir set, which run_instance's relative log paths need
    with ThreadPoolExecutor(max_workers=min(8, (os.cpu_count() or 2) * 3)) as pool:
        return dict(zip(jobs, pool.map(one, jobs), strict=True))


@pytest.mark.parametrize("task_id", sorted(DEMO))
def test_same_resolved_status(verdicts: dict[tuple[str, str], tuple[bool, bool]],
                              task_id: str) -> None:
    assert verdicts[(task_id, "gold")] == (True, True), "the gold patch must resolve it"
    assert verdicts[(task_id, "empty")] == (False, False), "the empty patch must not"


def test_submit_to_reward_latency(images: dict[str, str], logs_dir: Path) -> None:
    task = DEMO[sorted(DEMO)[0]]
    image = images[task.instance_id]
    cold = [ours(task, image, task.patch) for _ in range(RUNS)]
    pool = SandboxPool(grader_size=1)
    try:
        warm = [warm_grade(task, image, pool) for _ in range(RUNS)]
    finally:
        pool.close()
    theirs = [official(task, image, task.patch) for _ in range(RUNS)]
    assert all(r for r, _ in cold + warm) and all(r for r, _, _ in theirs)
    numbers = {
        "task": task.instance_id, "runs": RUNS,
        "repogym_cold_s": round(statistics.median(s for _, s in cold), 2),
        "repogym_warm_s": round(statistics.median(s for _, s in warm), 2),
        "swebench_report_s": round(statistics.median(s for _, s, _ in theirs), 2),
        "swebench_total_s": round(statistics.median(s for _, _, s in theirs), 2),
    }
    print("\nsubmit-to-reward latency (median):", json.dumps(numbers))
