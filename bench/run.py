"""The environment's own speed next to the plain alternatives, side by side in one run.

Sections (all on one task of a suite, its image built first):

- ``startup``: ``repogym --version``, ``repogym --help`` and importing the environment, each a
  new process, next to ``python -c pass``.
- ``step``: ``env.step(bash "true" / "ls")`` vs ``docker exec`` vs docker-py ``exec_run``, on
  the same container.
- ``reset``: ``env.reset()`` from a warm pool vs a fresh container per reset.
- ``grade``: submit-to-reward next to pytest's own run time; ``swebench``: SWE-bench's
  ``run_instance`` on the same image and gold patch.
- ``parallel``: steps per second with 1, 2, 4 envs stepping in threads.
- ``memory``: an idle env's container memory and the host memory each env costs.
- ``vector``: containers held by sync and async vector envs of default envs, and their resets.
- ``fork``: a snapshot and a branch against a verified in-place reset, replaying the steps and
  ``docker commit`` + start.
- ``creation``: task creation, seconds per tried and per kept candidate, selective checks
  against full runs (``creation.py``).
- ``backends``: step and reset latency on every backend (Docker, rootless Podman, bwrap),
  each in a process of its own, against Docker's (``backends.py``).

Figures are medians with their 10th-90th percentile spread; ``ratio`` is a row's median over
the median of the row it is compared with (``vs``), so 12.0 on ``docker exec`` reads "takes 12
times as long as repogym".
"""

from __future__ import annotations

import os
import platform
import time
import uuid
from dataclasses import asdict, dataclass, replace
from typing import Any

from repogym.bench.backends import backend_latency
from repogym.bench.core import Context, Row, ms, row
from repogym.bench.cost import (
    compare_grading,
    grading_latency,
    memory_per_env,
    swebench_latency,
)
from repogym.bench.creation import creation_speed
from repogym.bench.forking import fork_latency
from repogym.bench.latency import parallel_steps, reset_latency, step_latency
from repogym.bench.startup import startup_latency
from repogym.bench.vectorized import vector_envs
from repogym.images.repository import ensure_image
from repogym.progress import Progress
from repogym.sandbox.client import docker_client
from repogym.suite import load_suite

SECTIONS = ("startup", "step", "reset", "grade", "swebench", "parallel", "memory", "vector",
            "fork", "creation", "backends")


@dataclass(frozen=True)
class BenchConfig:
    """What ``repogym bench`` measures and how many times."""

    suite: str = "demo"  # a suite name or path; one of its tasks is used throughout
    task_id: str | None = None  # the task; the suite's first (by id) when None
    steps: int = 200  # step latency samples per method and command
    resets: int = 20  # reset samples per variant
    grades: int = 5  # repogym submit-to-reward samples (warm and fresh grader each)
    swebench_runs: int = 3  # swebench run_instance samples (each takes ~16 s)
    parallel: tuple[int, ...] = (1, 2, 4)  # numbers of envs stepping at once
    parallel_seconds: float = 5.0  # how long each parallel level steps
    startup_runs: int = 10  # new processes per start-up measure
    creation_candidates: int = 4  # planted bugs checked both ways by the creation section
    sections: tuple[str, ...] = SECTIONS
    logs_dir: str | None = None  # where swebench writes its logs (a temporary folder if None)

    def __post_init__(self) -> None:
        unknown = [s for s in self.sections if s not in SECTIONS]
        if unknown or not self.sections:
            raise ValueError(f"sections={self.sections!r}: choose from {', '.join(SECTIONS)}")
        counts = {"steps": self.steps, "resets": self.resets, "grades": self.grades,
                  "swebench_runs": self.swebench_runs, "startup_runs": self.startup_runs,
                  "creation_candidates": self.creation_candidates}
        low = {k: v for k, v in counts.items() if v < 1}
        if low:
            raise ValueError(f"repetition counts must be >= 1: {low}")
        if not self.parallel or min(self.parallel) < 1:
            raise ValueError(f"parallel={self.parallel!r}: give env counts >= 1, e.g. (1, 2, 4)")
        if self.parallel_seconds <= 0:
            raise ValueError(f"parallel_seconds={self.parallel_seconds}: use a positive number")

    def quick(self) -> BenchConfig:
        """Tiny counts: checks that every section runs, in well under a minute each."""
        return replace(self, steps=10, resets=2, grades=1, swebench_runs=1, parallel=(1, 2),
                       parallel_seconds=1.0, startup_runs=3, creation_candidates=2)


# the goals: (goal, row key, kind, limit); kind: "median" (below the limit, in the row's unit;
# "median@python" or "median@other": only for a task of Python, or of another language),
# "ratio" (the row's own ratio, at least), "ratio_at_most" (at most), or "speedup:KEY" (KEY's
# median over the row's, at least)
TARGETS: list[tuple[str, str, str, float]] = [
    ("`repogym --help` median < 0.5 s", "startup.help", "median", 500.0),
    ("step median < 5 ms (true)", "step.repogym.true", "median", 5.0),
    ("step median < 5 ms (ls)", "step.repogym.ls", "median", 5.0),
    ("step >= 10x faster than exec_run (true)", "step.exec_run.true", "ratio", 10.0),
    ("step >= 10x faster than exec_run (ls)", "step.exec_run.ls", "ratio", 10.0),
    ("warm reset median < 150 ms", "reset.warm", "median", 150.0),
    ("warm reset >= 5x faster than a fresh container", "reset.fresh", "ratio", 5.0),
    ("default settings: reset median < 150 ms", "reset.default", "median", 150.0),
    ("default settings: reset >= 5x faster than a fresh container", "reset.default",
     "speedup:reset.fresh", 5.0),
    ("snapshot() costs at most 2x a verified in-place reset", "fork.snapshot", "ratio_at_most",
     2.0),
    ("branch (restore, verify) costs at most 2x a verified in-place reset", "fork.branch",
     "ratio_at_most", 2.0),
    ("branch faster than docker commit + start", "fork.commit", "ratio", 1.0),
    ("every defence on: submit-to-reward within 1.25x of the same grade with disguise=False",
     "grade.submit", "ratio_at_most", 1.25),
    ("submit-to-reward within 0.5 s of pytest's own run time", "grade.over_summary", "median",
     0.5),
    ("Python: submit-to-reward within 0.5 s of the tests run by hand", "grade.overhead",
     "median@python", 0.5),
    ("Go, JavaScript, Rust, Java: submit-to-reward within 0.3 s of the tests run by hand "
     "in a new container", "grade.overhead_fresh", "median@other", 0.3),
    ("env.close() median < 1 s (no teardown stall)", "teardown.close", "median", 1000.0),
    ("task creation: >= 2x fewer seconds per kept task than full runs", "creation.full.kept",
     "ratio", 2.0),
]


def targets(rows: list[Row], language: str = "python") -> list[dict[str, Any]]:
    """The goals, met or not, for the rows that were measured on a task of ``language``."""
    by_key = {r.key: r for r in rows}
    out = []
    for goal, key, kind, limit in TARGETS:
        kind, _, scope = kind.partition("@")
        if scope and (scope == "python") != (language == "python"):
            continue
        r = by_key.get(key)
        ratio = r.ratio if r is not None else None
        if kind.startswith("speedup:") and r is not None and r.stat is not None:
            other = by_key.get(kind.split(":", 1)[1])
            ratio = (other.stat.median / r.stat.median if other is not None and other.stat
                     and r.stat.median > 0 else None)
        if r is None or r.stat is None or (kind != "median" and ratio is None):
            continue
        if kind == "median":
            met = r.stat.median < limit
        elif kind == "ratio_at_most":
            met = ratio is not None and ratio <= limit
        else:
            met = (ratio or 0.0) >= limit
        out.append({"goal": goal, "row": key, "median": r.stat.median, "ratio": ratio,
                    "met": met})
    return out


def _pick_task(config: BenchConfig) -> Any:
    tasks = sorted(load_suite(config.suite), key=lambda t: t.instance_id)
    if config.task_id is None:
        return tasks[0]
    for task in tasks:
        if task.instance_id == config.task_id:
            return task
    raise ValueError(f"task {config.task_id!r} is not in suite {config.suite!r}: pick one of "
                     f"{', '.join(t.instance_id for t in tasks[:10])}")


def _machine() -> dict[str, Any]:
    version = docker_client().version()
    return {"cpus": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), "docker": version.get("Version"),
            "loadavg_start": os.getloadavg()}


def run_bench(config: BenchConfig, progress: Progress = print) -> dict[str, Any]:
    """Runs the configured sections; returns rows, targets, config and machine as JSON data."""
    task = _pick_task(config)
    progress(f"bench on {task.instance_id}: building or finding its image")
    image = ensure_image(task, progress=lambda _m: None).tag
    ctx = Context(task, image, f"bench-{uuid.uuid4().hex[:6]}", progress)
    machine, start = _machine(), time.monotonic()
    rows = _sections(config, ctx)
    rows.append(row("teardown.close", "env.close() (every env the bench made)", "ms",
                    ms(ctx.closes)))
    machine.update(loadavg_end=os.getloadavg(), seconds=round(time.monotonic() - start, 1))
    return {"task": task.instance_id, "image": image, "config": asdict(config),
            "machine": machine, "rows": [r.to_dict() for r in rows],
            "targets": targets(rows, task.environment.language)}


def _sections(config: BenchConfig, ctx: Context) -> list[Row]:
    c, rows = config, list[Row]()
    runs = {
        "startup": lambda: startup_latency(ctx, c.startup_runs),
        "step": lambda: step_latency(ctx, c.steps),
        "reset": lambda: reset_latency(ctx, c.resets),
        "grade": lambda: grading_latency(ctx, c.grades),
        "swebench": lambda: swebench_latency(ctx, c.swebench_runs, c.logs_dir),
        "parallel": lambda: parallel_steps(ctx, c.parallel, c.parallel_seconds),
        "memory": lambda: memory_per_env(ctx, max(c.parallel)),
        "vector": lambda: vector_envs(ctx, max(c.parallel), min(c.resets, 3)),
        "fork": lambda: fork_latency(ctx, c.resets),
        "creation": lambda: creation_speed(ctx, c.creation_candidates),
        "backends": lambda: backend_latency(ctx, c.steps, c.resets),
    }
    for name in SECTIONS:
        if name in c.sections:
            rows += runs[name]()
    return compare_grading(rows)
