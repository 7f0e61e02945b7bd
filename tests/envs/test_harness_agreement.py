"""repogym's grader and SWE-bench's own ``run_instance`` agree on every demo task.

``run_instance`` (swebench 5.x) takes a ``TestSpec`` that names its image directly and only
pulls when the engine lacks it, so it runs here on repogym's own image, with no registry: the
spec's eval script is SWE-bench's usual one (reset the test files, apply the test patch between
the output markers, run the task's test command on its test files). The gold patch must
resolve every task under both graders and the empty prediction (``skip_patch``: SWE-bench's
negative mode, which runs the tests on the untouched base) must resolve none.

``test_submit_to_reward_latency`` times both graders on one task (median of a few runs) and
prints the numbers; run with ``-s`` to see them.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import statistics
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import docker
import pytest
from swebench.harness.constants import LOG_REPORT, RUN_EVALUATION_LOG_DIR
from swebench.harness.run_evaluation import run_instance
from swebench.harness.utils import make_test_spec
from swebench.types import TestSpec

from repogym.envs.grading.grader import Grader, GraderConfig
from repogym.tasks.images import ensure_image
from repogym.tasks.schema import Task
from repogym.tasks.suite import load_suite

pytestmark = [pytest.mark.docker, pytest.mark.slow]

DEMO = {t.instance_id: t for t in load_suite("demo")}
MODEL = "repogym-agreement"
HEREDOC = "EOF_114329324912"  # the delimiter SWE-bench's own eval scripts use
RUNS = 3  # runs per grader for the latency median
_DIFF_GIT = re.compile(r"^diff --git a/(\S+) b/(\S+)$", re.M)


def patch_files(patch: str) -> list[str]:
    return sorted({m.group(2) for m in _DIFF_GIT.finditer(patch)})


def test_files(task: Task) -> list[str]:
    """What the grader runs: the test patch's files and the files of every expected test."""
    ids = [*task.FAIL_TO_PASS, *task.PASS_TO_PASS]
    files = set(patch_files(task.test_patch)) | {i.split("::")[0] for i in ids}
    return sorted(f for f in files if f.endswith(".py"))


def eval_script(task: Task) -> str:
    touched = " ".join(shlex.quote(f) for f in patch_files(task.test_patch))
    run = f"{task.environment.test_cmd} {' '.join(shlex.quote(f) for f in test_files(task))}"
    return "\n".join([
        "#!/bin/bash", "set -uxo pipefail", "cd /testbed",
        f"git checkout HEAD -- {touched}",
        f"git apply -v - <<'{HEREDOC}'\n{task.test_patch.rstrip(chr(10))}\n{HEREDOC}",
        ": '>>>>> Start Test Output'", run, ": '>>>>> End Test Output'",
        f"git checkout HEAD -- {touched}",
    ]) + "\n"


def test_spec(task: Task, image: str) -> TestSpec:
    parser = task.environment.log_parser
    return make_test_spec({
        "instance_id": task.instance_id, "image": image, "repo": task.repo,
        "version": task.version or "0", "FAIL_TO_PASS": list(task.FAIL_TO_PASS),
        "PASS_TO_PASS": list(task.PASS_TO_PASS), "eval_type": "pass_and_fail",
        "log_parser": parser if parser.startswith("parse_log_") else f"parse_log_{parser}",
        "eval_script": eval_script(task),
    })


def official(task: Task, image: str, patch: str | None) -> tuple[bool, float, float]:
    """SWE-bench's verdict, the seconds until its report exists, and its total seconds.

    ``patch=None`` is the empty prediction, run in ``skip_patch`` mode."""
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
            time.sleep(0.02)

    watcher = threading.Thread(target=watch, daemon=True)
    start = time.monotonic()
    watcher.start()
    try:
        result = run_instance(test_spec(task, image), pred, docker.from_env(), run_id,
                              timeout=600, skip_patch=patch is None)
    finally:
        done.set()
        watcher.join()
    total = time.monotonic() - start
    assert result is not None, f"run_instance failed: see {report_path.parent}/run_instance.log"
    _, report = result
    return bool(report[task.instance_id]["resolved"]), (seen or [start + total])[0] - start, total


def ours(task: Task, image: str, patch: str) -> tuple[bool, float]:
    start = time.monotonic()
    report = Grader(GraderConfig()).grade(task, patch, image)
    return report.resolved, time.monotonic() - start


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

    # run_instance spends most of its time in `docker stop` (15 s grace), so threads help
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
    mine = [ours(task, image, task.patch) for _ in range(RUNS)]
    theirs = [official(task, image, task.patch) for _ in range(RUNS)]
    assert all(r for r, _ in mine) and all(r for r, _, _ in theirs)
    numbers = {
        "task": task.instance_id, "runs": RUNS,
        "repogym_grade_s": round(statistics.median(s for _, s in mine), 2),
        "swebench_report_s": round(statistics.median(s for _, s, _ in theirs), 2),
        "swebench_total_s": round(statistics.median(s for _, _, s in theirs), 2),
    }
    print("\nsubmit-to-reward latency (median):", json.dumps(numbers))
