"""Several machines, played on this one: a Ray cluster of a head node and a worker node
(``ray start``), each with its own Docker engine (the machine's, and a second one of ours).

The vector env spreads its environments over both nodes and masks the episodes of an engine
that stops answering; training runs two updates with episodes on both nodes, and losing the
worker node mid-rollout leaves it running with the lost episodes masked, run again on the
head node and reported, and no container behind on either engine.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cluster_support import RayNodes, TLSEngine, labelled
from reliability_support import REPO_ROOT, child_env, repogym_cmd, stop, wait_until

from repogym.sandbox.base import LABEL_RUN
from repogym.schema import Task

pytestmark = [pytest.mark.docker, pytest.mark.slow]

LOCAL = "unix:///var/run/docker.sock"


@dataclass
class Cluster:
    nodes: RayNodes
    engine: TLSEngine
    suite: Path

    def containers(self, run_id: str) -> dict[str, list[str]]:
        return {host: labelled(host, LABEL_RUN, run_id) for host in (LOCAL, self.engine.host)}

    def none_left(self, run_id: str) -> bool:
        return not any(self.containers(run_id).values())


@pytest.fixture(scope="module")
def cluster(tls_engine: TLSEngine, toy_task: Task, toy_image: str,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if importlib.util.find_spec("ray") is None:
        message = "needs Ray: pip install 'repogym[ray]' (make venv installs it)"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    suite = tmp_path_factory.mktemp("suite") / "tasks.jsonl"
    suite.write_text(json.dumps({**toy_task.to_dict(), "split": "train"}) + "\n")
    nodes = RayNodes(Path(f"/tmp/rgr-{os.getpid()}"))
    try:
        # the worker node's engine is the second one; it gets the image from the machine's
        nodes.start(head_env={}, worker_env={"DOCKER_HOST": tls_engine.host,
                                             "REPOGYM_IMAGE_SOURCES": LOCAL})
        yield Cluster(nodes, tls_engine, suite)
    finally:
        nodes.close()


# Run in a child process: Ray reads its token settings once per process, and this one may
# have imported Ray before with other settings.
VECTOR_SCRIPT = """
import json, sys
from repogym.envs.cluster import RayVectorEnv

envs = RayVectorEnv(4, ray="auto", envs_per_worker=2, suite=sys.argv[1], run_id="rayvec",
                    warm_grader=False)

def report(tag, result, **extra):
    obs, rewards, terminated, truncated, infos = result
    print(json.dumps({"tag": tag, "obs": list(obs), "rewards": rewards.tolist(),
                      "terminated": terminated.tolist(), "truncated": truncated.tolist(),
                      "lost": [bool(x) for x in infos.get("_lost", [False] * 4)], **extra}),
          flush=True)

try:
    placement = envs.placement()
    obs, infos = envs.reset(seed=0)
    print(json.dumps({"tag": "reset", "obs": list(obs), "task_ids": list(infos["task_id"]),
                      "engines": [p["engine"] for p in placement],
                      "nodes": [p["node_id"] for p in placement]}), flush=True)
    input()  # the parent looks at the containers
    bash = {"tool": "bash", "command": "echo $((6 * 7))"}
    report("step1", envs.step([bash] * 4))
    input()  # the parent stops the second engine
    report("step2", envs.step([bash] * 4))
    input()  # the parent starts it again
    report("step3", envs.step([bash] * 4), lost_total=envs.lost,
           workers_lost=envs.fleet.stats["workers_lost"])
finally:
    envs.close()
"""


def test_a_vector_env_spreads_over_both_nodes_and_masks_a_lost_engine(
        cluster: Cluster, tmp_path: Path) -> None:
    script = tmp_path / "vector.py"
    script.write_text(VECTOR_SCRIPT)
    proc = subprocess.Popen([sys.executable, str(script), str(cluster.suite)], cwd=REPO_ROOT,
                            env=child_env(**cluster.nodes.env), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None

    def answer() -> dict[str, Any]:
        for line in proc.stdout:  # type: ignore[union-attr]
            if line.startswith("{"):
                return dict(json.loads(line))
        raise AssertionError(f"the vector env stopped: {proc.stderr.read()[-3000:]}")  # type: ignore[union-attr]

    def go_on() -> None:
        proc.stdin.write("\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]

    try:
        reset = answer()
        assert sorted(reset["engines"]) == sorted([LOCAL, LOCAL, cluster.engine.host,
                                                   cluster.engine.host])
        assert len(set(reset["nodes"])) == 2
        assert all("calc.add(2, 3)" in o for o in reset["obs"])
        assert reset["task_ids"] == ["toy__calc-1"] * 4
        on_engine = cluster.containers("rayvec")
        assert on_engine[LOCAL] and on_engine[cluster.engine.host]  # episodes on both
        go_on()
        assert all("42" in o for o in answer()["obs"])

        cluster.engine.stop()  # the worker node's engine stops answering mid-episode
        go_on()
        step = answer()
        lost = [e == cluster.engine.host for e in reset["engines"]]
        assert step["truncated"] == lost == step["lost"]
        assert not any(step["terminated"]) and not any(step["rewards"])
        for o, gone in zip(step["obs"], lost, strict=True):
            assert o == "" if gone else "42" in o

        cluster.engine.start()  # back: the lost environments reset on a replacement worker
        go_on()
        step = answer()
        for o, gone in zip(step["obs"], lost, strict=True):
            assert ("calc.add(2, 3)" if gone else "42") in o
        assert step["lost_total"] == 2 and step["workers_lost"] >= 1
        assert proc.wait(120) == 0, proc.stderr.read()[-3000:]  # type: ignore[union-attr]
    finally:
        stop(proc)
    assert wait_until(lambda: cluster.none_left("rayvec"), 60, 1.0), cluster.containers("rayvec")


def test_training_on_two_nodes_survives_losing_the_worker_node(
        cluster: Cluster, tmp_path: Path) -> None:
    out = tmp_path / "run"
    cmd = repogym_cmd(
        "train", "--ray", "auto", "--suite", str(cluster.suite), "--model", "tiny",
        "--updates", "2", "--episodes-per-update", "4", "--num-envs", "4",
        "--envs-per-worker", "2", "--max-turns", "1", "--max-new-tokens", "8",
        "--micro-batch-size", "4", "--no-gradient-checkpointing", "--no-tensorboard",
        "--out", str(out),
        "--env-kwargs", json.dumps({"run_id": "raytrain", "warm_grader": False}))
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=child_env(**cluster.nodes.env),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("update    0"):
                cluster.nodes.kill("worker")  # the second rollout has just begun
                break
        lines += proc.stdout.readlines()
        assert proc.wait(300) == 0, "".join(lines[-40:])
    finally:
        stop(proc)
    metrics = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    trajs = [json.loads(x) for x in (out / "trajectories.jsonl").read_text().splitlines()]
    lost = [json.loads(x) for x in (out / "lost_episodes.jsonl").read_text().splitlines()]
    assert [m["update"] for m in metrics] == [0, 1]
    workers = json.loads((out / "cluster.json").read_text())
    assert sorted(w["engine"] for w in workers) == sorted([LOCAL, cluster.engine.host])
    # update 0: episodes on both nodes, per-node throughput reported for each
    first = {t["where"] for t in trajs if t["update"] == 0}
    assert len(first) == 2, first
    assert sum(k.startswith("perf/node/") for k in metrics[0]) == 2
    assert metrics[0]["perf/env_wait_s"] >= 0 and metrics[0]["perf/generation_s"] > 0
    # update 1: the worker node's episodes lost, masked, run again on the head node
    assert lost and all(x["update"] == 1 and x["retried"] for x in lost)
    [gone] = {x["where"] for x in lost}
    assert gone in first
    assert metrics[1]["charts/episodes_lost"] == len(lost) and metrics[1]["cluster/workers_lost"]
    second = [t for t in trajs if t["update"] == 1]
    assert sorted(t["episode"] for t in second) == list(range(4))  # every job finished once
    assert {x["episode"] for x in lost} <= {t["episode"] for t in second if t["where"] != gone}
    assert metrics[1]["charts/episodes"] == 4
    assert wait_until(lambda: cluster.none_left("raytrain"), 60, 1.0), \
        cluster.containers("raytrain")
