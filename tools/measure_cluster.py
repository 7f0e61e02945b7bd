"""Measures `repogym train --ray` on a two-node Ray cluster played on this one machine.

    python tools/measure_cluster.py --suite demo --updates 3 --num-envs 8 --out runs/cluster

Starts what the cluster tests start (a second Docker engine of its own, a head node on the
machine's engine and a worker node on the second one, each offering ``docker`` slots), runs
the training command against it, prints per update the episodes per second of each node and
the learner's time waiting on environments against generating, and stops everything it
started. The worker node copies the suite's images from the machine's engine by their tags.
Needs root, dockerd, ip and openssl (as the tests do).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "reliability"))

from cluster_support import RayNodes, TLSEngine  # noqa: E402

LOCAL = "unix:///var/run/docker.sock"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="demo")
    parser.add_argument("--updates", type=int, default=3)
    parser.add_argument("--num-envs", type=int, default=8, help="split evenly over the 2 nodes")
    parser.add_argument("--envs-per-worker", type=int, default=2)
    parser.add_argument("--episodes-per-update", type=int, default=16)
    parser.add_argument("--max-turns", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--out", default="runs/cluster")
    args = parser.parse_args()
    if args.num_envs % 2:
        parser.error("--num-envs must be even: half of them on each node")

    # a SIGTERM (a timeout) still stops the engine and the nodes this script started
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    engine = TLSEngine(Path(f"/tmp/rgm-{os.getpid()}"))
    nodes = RayNodes(Path(f"/tmp/rgn-{os.getpid()}"))
    try:
        engine.start()
        nodes.start(head_env={}, worker_env={"DOCKER_HOST": engine.host,
                                             "REPOGYM_IMAGE_SOURCES": LOCAL},
                    slots=args.num_envs // 2)
        cmd = [sys.executable, "-m", "repogym", "train", "--ray", "auto", "--suite", args.suite,
               "--model", "tiny", "--updates", str(args.updates),
               "--episodes-per-update", str(args.episodes_per_update),
               "--num-envs", str(args.num_envs), "--envs-per-worker", str(args.envs_per_worker),
               "--max-turns", str(args.max_turns), "--max-new-tokens", str(args.max_new_tokens),
               "--no-tensorboard", "--out", args.out,
               "--env-kwargs", json.dumps({"warm_grader": False})]
        print("$", " ".join(cmd[1:]), flush=True)
        start = time.monotonic()
        with subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **nodes.env}) as train:
            try:
                if train.wait() != 0:
                    raise SystemExit(f"train failed with status {train.returncode}")
            finally:
                if train.poll() is None:
                    train.terminate()
                    train.wait(120)
        print(f"train took {time.monotonic() - start:.0f} s")
    finally:
        nodes.close()
        engine.close()
    workers = json.loads((Path(args.out) / "cluster.json").read_text())
    print(json.dumps({"nodes": {w["where"]: w["engine"] for w in workers}}))
    for line in (Path(args.out) / "metrics.jsonl").read_text().splitlines():
        m = json.loads(line)
        nodes_rate = {k.split("/")[2]: round(v, 3) for k, v in m.items()
                      if k.startswith("perf/node/")}
        print(json.dumps({
            "update": m["update"], "episodes": m["charts/episodes"],
            "episodes_per_s_by_node": nodes_rate,
            "rollout_s": round(m["perf/rollout_s"], 2),
            "env_wait_s": round(m["perf/env_wait_s"], 2),
            "generation_s": round(m["perf/generation_s"], 2),
            "env_wait_fraction": round(m["perf/env_wait_fraction"], 3),
            "env_s_summed": round(m["perf/env_s"], 2),
        }))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
