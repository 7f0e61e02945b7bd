"""A vector env of 4 on one backend: async workers leasing from the parent's warm pool, three
resets, the gold patch on three envs, a submit on all four; prints the rewards, the containers
at the end and the reset times, then what is left after close (nothing).

    REPOGYM_BACKEND=podman python tools/vector_env_check.py podman
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections import Counter

import gymnasium as gym
import numpy as np

import repogym  # noqa: F401  (registers the environment)
from repogym.sandbox.base import LABEL_ROLE, LABEL_RUN
from repogym.sandbox.client import docker_client
from repogym.suite import load_suite


def main(backend: str) -> None:
    tasks = [t for t in load_suite("demo", "all") if t.instance_id == "demo__minicalc-1"]
    run = f"vec4-{uuid.uuid4().hex[:6]}"
    envs = gym.make_vec("repogym/SWE-v0", num_envs=4, vectorization_mode="async", tasks=tasks,
                        split="all", run_id=run, sandbox=backend)

    def roles() -> Counter[str]:
        rows = docker_client().api.containers(all=True, filters={"label": f"{LABEL_RUN}={run}"})
        return Counter(r["Labels"][LABEL_ROLE] for r in rows)

    try:
        times = []
        for episode in range(3):
            start = time.monotonic()
            envs.reset(seed=episode)
            times.append(round(time.monotonic() - start, 2))
            obs, *_ = envs.step(np.array(['{"tool": "bash", "command": "pwd; id -u"}'] * 4,
                                         dtype=object))
            assert all(o.split() == ["/testbed", "1000"] for o in obs), obs
            time.sleep(2)  # an agent's thinking: the pool refills meanwhile
        gold = json.dumps({"tool": "bash",
                           "command": f"git apply <<'EOF2'\n{tasks[0].patch}EOF2"})
        noop = '{"tool": "bash", "command": "true"}'
        envs.step(np.array([gold, gold, noop, gold], dtype=object))
        _, rewards, terminated, _, _ = envs.step(np.array(['{"tool": "submit"}'] * 4,
                                                          dtype=object))
        print(f"{backend}: rewards {[float(r) for r in rewards]}, terminated "
              f"{[bool(t) for t in terminated]}, containers {dict(roles())}, resets {times} s")
    finally:
        envs.close()
    time.sleep(3)
    print(f"left after close: {dict(roles())}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docker")
