"""SWE-bench's own ``run_instance`` on a repogym image, for comparisons with our grader.

``run_instance`` (swebench 5.x) takes a ``TestSpec`` that names its image directly and pulls
only when the engine lacks it, so it runs on repogym's image with no registry. The eval script
is SWE-bench's usual one: reset the test files, apply the test patch, run the task's test
command on its test files between SWE-bench's output markers.

``run_instance`` writes its logs under ``./logs`` (a path relative to the working folder), so
:func:`run_official` runs it with the process's working folder changed to ``logs_dir``; a lock
lets one call at a time do that. (No function here is named ``test_*``, so test modules can
import them without pytest collecting them.)

``network_mode="none"`` starts SWE-bench's container without a network, as repogym's grader
does; engines without a usable default bridge (no ``docker0``) cannot start it otherwise.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import docker
from docker.models.containers import ContainerCollection

from repogym.errors import GradingError
from repogym.sandbox.features import engine_features
from repogym.schema import Task

if TYPE_CHECKING:
    from swebench.types import TestSpec

MODEL = "repogym-official"
HEREDOC = "EOF_114329324912"  # the delimiter SWE-bench's own eval scripts use
_DIFF_GIT = re.compile(r"^diff --git a/(\S+) b/(\S+)$", re.M)
_chdir_lock = threading.Lock()


@dataclass(frozen=True)
class OfficialResult:
    """SWE-bench's verdict and timings for one ``run_instance`` call."""

    resolved: bool
    report_seconds: float  # until report.json existed: the verdict is known
    total_seconds: float  # until run_instance returned (its container stopped and removed)
    log_dir: Path


def patch_files(patch: str) -> list[str]:
    return sorted({m.group(2) for m in _DIFF_GIT.finditer(patch)})


def eval_test_files(task: Task) -> list[str]:
    """What SWE-bench's eval script names after the test command: the task's test directives
    when it has them (``get_test_directives``: Django's are module names, and its runner
    refuses a path to a file), else the test patch's files and the files of every expected
    test."""
    if task.environment.test_files:
        return list(task.environment.test_files)
    ids = [*task.FAIL_TO_PASS, *task.PASS_TO_PASS]
    files = set(patch_files(task.test_patch)) | {i.split("::")[0] for i in ids}
    return sorted(f for f in files if f.endswith(".py"))


def eval_script(task: Task) -> str:
    touched = " ".join(shlex.quote(f) for f in patch_files(task.test_patch))
    run = f"{task.environment.test_cmd} {' '.join(shlex.quote(f) for f in eval_test_files(task))}"
    return "\n".join([
        "#!/bin/bash", "set -uxo pipefail", "cd /testbed",
        f"git checkout HEAD -- {touched}",
        f"git apply -v - <<'{HEREDOC}'\n{task.test_patch.rstrip(chr(10))}\n{HEREDOC}",
        ": '>>>>> Start Test Output'", run, ": '>>>>> End Test Output'",
        f"git checkout HEAD -- {touched}",
    ]) + "\n"


def make_spec(task: Task, image: str) -> TestSpec:
    """A ``TestSpec`` for ``task`` that runs on ``image`` (a repogym image tag)."""
    from swebench.harness.utils import make_test_spec

    parser = task.environment.log_parser
    return make_test_spec({
        "instance_id": task.instance_id, "image": image, "repo": task.repo,
        "version": task.version or "0", "FAIL_TO_PASS": list(task.FAIL_TO_PASS),
        "PASS_TO_PASS": list(task.PASS_TO_PASS), "eval_type": "pass_and_fail",
        "log_parser": parser if parser.startswith("parse_log_") else f"parse_log_{parser}",
        "eval_script": eval_script(task),
    })


@contextlib.contextmanager
def _working_folder(path: Path) -> Iterator[None]:
    """``contextlib.chdir`` for Python 3.10."""
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


class _Containers(ContainerCollection):
    """``containers.create`` with a network mode of our choosing (SWE-bench passes none), and
    an init process: ``run_instance``'s container runs ``tail -f /dev/null`` as its first
    process, which ignores the SIGTERM of ``docker stop``, so every run waited out the 15 s
    grace period after its report (a quarter of a Lite instance's agreement, serialised by
    :data:`_chdir_lock`). Docker's init forwards the signal and the container stops at once;
    the eval script runs by ``exec`` as before."""

    def create(self, image: str, command: Any = None, **kwargs: Any) -> Any:
        mode = getattr(self.client, "network_mode", None)
        if mode is not None:
            kwargs.setdefault("network_mode", mode)
        cpus = getattr(self.client, "cpus", None)
        if cpus is not None:
            kwargs.setdefault("nano_cpus", int(cpus * 1e9))
        kwargs.setdefault("init", True)
        return super().create(image, command, **kwargs)


class _Client(docker.DockerClient):
    network_mode: str | None = None
    cpus: float | None = None

    @property
    def containers(self) -> ContainerCollection:
        return _Containers(client=self)


def official_client(network_mode: str | None = None, cpus: float | None = None
                    ) -> docker.DockerClient:
    """A docker-py client for ``run_instance``; ``network_mode`` applies to its containers,
    and ``cpus`` is their CPU quota (none when None, as SWE-bench runs them). An agreement
    gives both graders the same quota: a test that needs two cores (pylint's parallel checks)
    passed in an unlimited container and failed in repogym's, or the other way round."""
    client = _Client.from_env()
    client.network_mode = network_mode
    # an engine that does not enforce a quota gives repogym's containers none either
    client.cpus = cpus if cpus is not None and "cpu" in engine_features(client).limits else None
    return client


def run_official(task: Task, image: str, patch: str | None, logs_dir: Path, run_id: str,
                 timeout: int = 600, network_mode: str | None = None,
                 cpus: float | None = None) -> OfficialResult:
    """Runs SWE-bench's ``run_instance``; ``patch=None`` is its ``skip_patch`` mode; ``cpus``:
    see :func:`official_client`."""
    from swebench.harness.constants import LOG_REPORT, RUN_EVALUATION_LOG_DIR
    from swebench.harness.run_evaluation import run_instance

    log_dir = Path(logs_dir) / RUN_EVALUATION_LOG_DIR / run_id / MODEL / task.instance_id
    pred = {"instance_id": task.instance_id, "model_name_or_path": MODEL,
            "model_patch": patch or ""}
    seen: list[float] = []
    done = threading.Event()

    def watch() -> None:  # the report is written before the container is stopped
        while not done.is_set() and not seen:
            if (log_dir / LOG_REPORT).exists():
                seen.append(time.monotonic())
            time.sleep(0.01)

    spec = make_spec(task, image)
    client = official_client(network_mode, cpus)
    Path(logs_dir).mkdir(parents=True, exist_ok=True)
    watcher = threading.Thread(target=watch, daemon=True)
    with _chdir_lock, _working_folder(Path(logs_dir)):
        start = time.monotonic()
        watcher.start()
        try:
            result = run_instance(spec, pred, client, run_id, timeout=timeout,
                                  skip_patch=patch is None)
        finally:
            total = time.monotonic() - start
            done.set()
            watcher.join()
    if result is None:
        raise GradingError(f"swebench run_instance failed on {task.instance_id}: see "
                           f"{log_dir}/run_instance.log")
    _, report = result
    return OfficialResult(bool(report[task.instance_id]["resolved"]),
                          (seen or [start + total])[0] - start, total, log_dir)
