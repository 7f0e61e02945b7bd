"""Vector envs of default envs: how many containers they hold, and what a reset of all costs.

A sync vector env's envs share their process's pool; an async vector env's workers lease from
the pool of the parent. Either way N envs should hold N containers plus a spare (and a warm
grading container) per image, where pools of their own would hold a spare and a grading
container each: 3N.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import gymnasium as gym
import numpy as np

from repogym.bench.core import Context, Row, close_env, ms, row, timed, wait_for
from repogym.envs.registration import ENV_ID
from repogym.sandbox import shared
from repogym.sandbox.base import LABEL_ROLE, LABEL_RUN
from repogym.sandbox.client import docker_client

ROUNDS = 3  # vector resets measured per mode


def _roles(run_id: str) -> Counter[str]:
    rows = docker_client().api.containers(all=True, filters={"label": f"{LABEL_RUN}={run_id}"})
    return Counter((r.get("Labels") or {}).get(LABEL_ROLE, "?") for r in rows)


def _vector(ctx: Context, mode: str, n: int, rounds: int) -> tuple[list[float], Counter[str]]:
    run_id = f"{ctx.run_id}-{mode}"
    envs: Any = gym.make_vec(ENV_ID, num_envs=n, vectorization_mode=mode, tasks=[ctx.task],
                             suite=None, run_id=run_id)
    step = np.array(['{"tool": "bash", "command": "echo bench >> README.md"}'] * n,
                    dtype=object)
    times: list[float] = []
    peak: Counter[str] = Counter()
    try:
        envs.reset(seed=0)
        for _ in range(rounds):
            envs.step(step)
            # an agent's turn: the spare and the last round's containers are ready again
            wait_for(lambda: _settled(run_id, ctx.image), what=f"the {mode} vector env's pool")
            count = _roles(run_id)
            peak = Counter({k: max(peak[k], count[k]) for k in count | peak})
            times.append(timed(lambda: envs.reset(seed=0))[0])
    finally:
        close_env(ctx, envs)
    return times, peak


def _settled(run_id: str, image: str) -> bool:
    """The spare is ready and nothing is being reset or started (the parent's pool, for an
    async vector env, lives in this process too)."""
    pool = shared.pool_of(run_id)
    if pool is None:
        return False
    counts = pool.counts()
    return pool.ready_count(image) >= 1 and not counts["resetting"] and not counts["starting"]


def vector_envs(ctx: Context, n: int, rounds: int = ROUNDS) -> list[Row]:
    rows: list[Row] = []
    for mode in ("sync", "async"):
        ctx.progress(f"vector envs: {n} default envs, {mode}: containers and {rounds} resets")
        times, peak = _vector(ctx, mode, n, rounds)
        note = (f"N={n}: {peak['agent']} agent + {peak['grader']} grading containers at most; "
                f"pools of their own would hold {3 * n}")
        rows.append(row(f"vector.{mode}.containers", f"containers held, {n} default envs "
                        f"({mode})", "containers", [float(peak["agent"] + peak["grader"])],
                        note))
        rows.append(row(f"vector.{mode}.reset", f"reset of all {n} envs ({mode}; beyond the "
                        "spare, each waits for an in-place reset)", "ms", ms(times)))
    return rows
