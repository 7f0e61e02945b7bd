"""Step and reset latency of the env on every backend (Docker, rootless Podman, the daemonless
bwrap), against Docker's, in one run of `repogym bench`.

A process runs its containers on one engine, so each backend is measured in a process of its
own (this module run with ``python -m``), one after the other, on the same task, with the same
counts: ``env.step(bash "true")``, a reset from a warm pool (``pool_size=1``, the used
container reset in place; bwrap keeps no pool: a new sandbox each time, both rows) and a reset
with a fresh sandbox each time (``pool_size=0``). Rows read ``backends.NAME.step`` and so on; the
ratio of each is its median over Docker's.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from typing import Any

import gymnasium as gym

from repogym.bench.core import Context, Row, compare, ms, row, timed, wait_for
from repogym.envs.registration import ENV_ID
from repogym.schema import Task

BACKENDS = ("docker", "podman", "bwrap")
MEASURES = {"step": "env.step(bash 'true')", "reset_warm": "env.reset(), warm pool",
            "reset_fresh": "env.reset(), a fresh sandbox each time"}


def backend_latency(ctx: Context, steps: int, resets: int,
                    backends: tuple[str, ...] = BACKENDS) -> list[Row]:
    """One child process per backend; a backend that cannot run here gets rows that say why."""
    rows: list[Row] = []
    for name in backends:
        ctx.progress(f"backend {name}: {steps} steps, {resets} warm and {resets} fresh resets")
        samples, why = _measure_in_child(ctx.task, name, steps, resets)
        for measure, what in MEASURES.items():
            rows.append(row(f"backends.{name}.{measure}", f"{what} on {name}", "ms",
                            ms(samples[measure]) if samples else None,
                            "" if samples else f"not measured: {why}"))
    for name in backends[1:]:
        for measure in MEASURES:
            rows = compare(rows, f"backends.{name}.{measure}", f"backends.{backends[0]}.{measure}")
    return rows


def _measure_in_child(task: Task, backend: str, steps: int, resets: int
                      ) -> tuple[dict[str, list[float]] | None, str]:
    request = json.dumps({"task": task.to_dict(), "backend": backend, "steps": steps,
                          "resets": resets})
    proc = subprocess.run([sys.executable, "-m", "repogym.bench.backends"], input=request,
                          capture_output=True, text=True, timeout=1800)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return None, tail[:300]
    return json.loads(lines[-1]), ""


def measure(task: Task, backend: str, steps: int, resets: int) -> dict[str, list[float]]:
    """The samples, in seconds, on ``backend`` in this process."""
    run = f"bench-{backend}-{uuid.uuid4().hex[:6]}"
    out: dict[str, list[float]] = {}
    env: Any = gym.make(ENV_ID, tasks=[task], suite=None, run_id=run, sandbox=backend,
                        pool_size=1, warm_grader=False, max_steps=10**6)
    try:
        env.reset(seed=0)
        for _ in range(3):  # warm-up
            env.step({"tool": "bash", "command": "true"})
        out["step"] = [timed(lambda: env.step({"tool": "bash", "command": "true"}))[0]
                       for _ in range(steps)]
        out["reset_warm"] = _resets(env, resets, wait=True)
    finally:
        env.close()
    env = gym.make(ENV_ID, tasks=[task], suite=None, run_id=run, sandbox=backend, pool_size=0,
                   reuse_containers=False, warm_grader=False)
    try:
        env.reset(seed=0)
        out["reset_fresh"] = _resets(env, resets, wait=False)
    finally:
        env.close()
    return out


def _resets(env: Any, n: int, wait: bool) -> list[float]:
    times = []
    pool, tag = env.unwrapped.pool, env.unwrapped.image.tag
    for _ in range(n):
        env.step({"tool": "bash", "command": "echo bench >> README.md; echo x > new_file.py"})
        if wait and pool is not None:  # an agent thinks longer than an in-place reset takes
            wait_for(lambda: pool.ready_count(tag) >= 1, what="a ready container")
        else:
            time.sleep(0.2)  # the last sandbox's removal: not on the next sample's clock
        times.append(timed(lambda: env.reset(seed=0))[0])
    return times


def _main() -> None:
    request = json.loads(sys.stdin.read())
    samples = measure(Task.from_dict(request["task"]), request["backend"], request["steps"],
                      request["resets"])
    print(json.dumps(samples))


if __name__ == "__main__":
    _main()
