"""The default settings are the fast ones: warm resets, and one pool per run however the envs
are vectorised (against a real engine: Docker, then rootless Podman, the ``engine`` fixture)."""

from __future__ import annotations

import json
import os
import time
import uuid
from collections import Counter

import gymnasium as gym
import numpy as np
import pytest

import repogym  # noqa: F401 - registers the env
from repogym.sandbox.base import LABEL_PID, LABEL_ROLE, LABEL_RUN
from repogym.sandbox.client import docker_client
from repogym.schema import Task

pytestmark = pytest.mark.docker

FIX = json.dumps({"name": "str_replace", "arguments": {
    "path": "calc/__init__.py", "old_str": "a - b", "new_str": "a + b"}})


def containers(run_id: str) -> list[dict]:
    return docker_client().api.containers(all=True, filters={"label": f"{LABEL_RUN}={run_id}"})


def roles(run_id: str) -> Counter[str]:
    return Counter(row["Labels"][LABEL_ROLE] for row in containers(run_id))


def settled(pool, image: str, seconds: float = 60.0) -> None:  # noqa: ANN001
    """Waits until the pool has a spare ready and nothing in flight: an agent thinks for longer
    than an in-place reset takes."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        stats = pool.stats if not hasattr(pool, "counts") else {**pool.stats, **pool.counts()}
        if pool.ready_count(image) >= 1 and not stats.get("resetting") and \
                not stats.get("starting"):
            return
        time.sleep(0.05)
    raise AssertionError(f"the pool did not settle: {pool.stats}")


def test_default_env_resets_are_served_warm(engine: str, toy_task: Task, toy_image: str) -> None:
    run = f"warm-{uuid.uuid4().hex[:6]}"
    # no pool arguments
    env = gym.make("repogym/SWE-v0", tasks=[toy_task], run_id=run, sandbox=engine)
    try:
        env.reset(seed=0)
        pool = env.unwrapped.pool
        for _ in range(3):
            env.step({"tool": "bash", "command": "echo changed > calc/__init__.py"})
            settled(pool, toy_image)
            start = time.monotonic()
            obs, _ = env.reset(seed=0)
            took = time.monotonic() - start
            assert "calc.add" in obs
            cat = env.step({"tool": "bash", "command": "grep -c 'a - b' calc/__init__.py"})[0]
            assert cat.strip() == "1"  # the used container came back reset
        stats = pool.stats
        # one container started for the first reset; every later one came from the pool, ready
        assert stats["misses"] == 1 and stats["hits"] == 3 and stats["waited"] == 0, stats
        assert stats["reused"] >= 2, stats
        assert took < 5.0  # a generous bound: the figure itself is `repogym bench`'s
        # the one in use, one ready; the warm grading container on top
        settled(pool, toy_image)
        assert roles(run) == {"agent": 2, "grader": 1}, roles(run)
    finally:
        env.close()
    assert wait_until(lambda: not containers(run))


def wait_until(predicate, seconds: float = 30.0) -> bool:  # noqa: ANN001
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def test_sync_vector_env_of_default_envs_shares_one_pool(engine: str, toy_task: Task,
                                                         toy_image: str) -> None:
    n, run = 3, f"vsync-{uuid.uuid4().hex[:6]}"
    envs = gym.make_vec("repogym/SWE-v0", num_envs=n, vectorization_mode="sync",
                        tasks=[toy_task], run_id=run, sandbox=engine)
    try:
        pools = {id(e.unwrapped.pool) for e in envs.envs}
        assert len(pools) == 1  # one pool for the N envs of this process
        pool = envs.envs[0].unwrapped.pool
        for _ in range(2):
            envs.reset(seed=1)
            envs.step(np.array(['{"tool": "bash", "command": "touch x"}'] * n, dtype=object))
            settled(pool, toy_image)
            count = roles(run)
            # N in use and one spare, one grading container: not a spare and a grader each
            assert count["agent"] == n + 1 and count["grader"] == 1, count
    finally:
        envs.close()
    assert wait_until(lambda: not containers(run))


def test_async_vector_env_workers_lease_from_the_parent(engine: str, toy_task: Task,
                                                        toy_image: str) -> None:
    n, run = 2, f"vasync-{uuid.uuid4().hex[:6]}"
    envs = gym.make_vec("repogym/SWE-v0", num_envs=n, vectorization_mode="async",
                        tasks=[toy_task], run_id=run, sandbox=engine)
    try:
        peak: Counter[str] = Counter()
        for _ in range(2):
            envs.reset(seed=2)
            obs, *_ = envs.step(np.array([FIX, '{"tool": "bash", "command": "pwd"}'],
                                         dtype=object))
            assert "a + b" in obs[0] and obs[1].strip() == "/testbed"
            time.sleep(1.0)
            count = roles(run)
            peak = Counter({k: max(peak[k], count[k]) for k in count | peak})
        _, rewards, term, _, _ = envs.step(np.array(['{"tool": "submit"}'] * n, dtype=object))
        assert list(term) == [True, True] and list(rewards) == [1.0, 0.0]  # graded in the parent
        owners = {row["Labels"][LABEL_PID] for row in containers(run)}
        assert owners == {str(os.getpid())}  # the parent started them all
        assert peak["agent"] <= n + 1 and peak["grader"] == 1, peak
    finally:
        envs.close()
    assert wait_until(lambda: not containers(run))
