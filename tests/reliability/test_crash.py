"""Crashes and interruptions: what a killed process leaves is removed, live owners' containers
are not touched, an interrupted eval stops cleanly and the rerun resumes, and a container that
stops under a running episode is an infrastructure failure (retried), not the agent's."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from reliability_support import (
    REPO_ROOT,
    child_env,
    pid_containers,
    repogym_cmd,
    stop,
    wait_until,
)

from repogym.sandbox.base import SandboxConfig, SandboxLost
from repogym.sandbox.docker import DockerSandbox

pytestmark = pytest.mark.docker

# A process in the middle of an episode: reset, one step, then it waits to be killed.
MID_EPISODE = textwrap.dedent("""
    import sys, time
    import gymnasium as gym
    import repogym
    env = gym.make("repogym/SWE-v0", suite="demo", split="eval")
    env.reset(seed=0, options={"task_id": "demo__minicalc-1"})
    env.step({"tool": "bash", "command": "echo working > notes.txt"})
    print("READY", flush=True)
    time.sleep(600)
""")

# A process that starts one sandbox, as the next run of repogym would, and ends.
NEXT_START = textwrap.dedent("""
    import sys
    from repogym.sandbox.base import SandboxConfig, SandboxLost
    from repogym.sandbox.docker import DockerSandbox
    DockerSandbox(SandboxConfig(image=sys.argv[1])).close()
""")


def mid_episode() -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", MID_EPISODE], stdout=subprocess.PIPE,
                            text=True, cwd=REPO_ROOT, env=child_env())
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("READY"), f"the child did not start an episode: {line!r}"
    assert wait_until(lambda: len(pid_containers(proc.pid)) >= 2, 60)  # agent + warm grader
    return proc



def test_sigkill_leftovers_are_removed_and_live_owners_kept(image: str, tmp_path: Path) -> None:
    killed, live = mid_episode(), mid_episode()
    try:
        left = pid_containers(killed.pid)
        stop(killed, signal.SIGKILL)
        assert pid_containers(killed.pid) == left, "SIGKILL cannot run any cleanup"
        report = tmp_path / "doctor.json"
        done = subprocess.run(repogym_cmd("doctor", "--cleanup", "--json", str(report)),
                              cwd=REPO_ROOT, env=child_env(), capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        removed = set(json.loads(report.read_text())["removed"])
        # every leftover is gone: doctor removed it, or a repogym process of the other test
        # process that started meanwhile did (each start removes dead owners' containers once)
        assert pid_containers(killed.pid) == []
        live_boxes = pid_containers(live.pid)
        assert len(live_boxes) >= 2, "a live owner's containers were removed"
        assert removed.isdisjoint(live_boxes)

        again = mid_episode()
        left = pid_containers(again.pid)
        stop(again, signal.SIGKILL)
        subprocess.run([sys.executable, "-c", NEXT_START, image], cwd=REPO_ROOT,
                       env=child_env(), check=True, timeout=120)
        assert pid_containers(again.pid) == [], f"the next start left {left}"
        assert len(pid_containers(live.pid)) >= 2
    finally:
        stop(live, signal.SIGTERM)  # its handler removes what it owns
    assert wait_until(lambda: pid_containers(live.pid) == [], 30)


EVAL_TASKS = ["demo__minicalc-1", "demo__minicalc-3", "demo__minicalc-4", "demo__textkit-1",
              "demo__textkit-2", "demo__textkit-3"]


def eval_cmd(out: Path) -> list[str]:
    tasks = [arg for t in EVAL_TASKS for arg in ("--task", t)]
    return repogym_cmd("eval", "--suite", "demo", "--agent", "gold", "--workers", "2",
                       "--out", str(out), "--quiet", *tasks)


def test_sigint_stops_eval_cleanly_and_the_rerun_resumes(tmp_path: Path) -> None:
    out = tmp_path / "run"
    results = out / "results.jsonl"
    # a job started in the background by a shell inherits SIGINT ignored (and Python then
    # keeps it so): give the child the default disposition, as a terminal would
    proc = subprocess.Popen(eval_cmd(out), cwd=REPO_ROOT, env=child_env(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert wait_until(lambda: results.exists() and results.read_text().count("\n") >= 1, 300)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr[-2000:]
    assert "Traceback" not in stderr, stderr[-2000:]
    assert pid_containers(proc.pid) == []
    first = [json.loads(line) for line in results.read_text().splitlines()]
    assert 1 <= len(first) < len(EVAL_TASKS)

    done = subprocess.run(eval_cmd(out), cwd=REPO_ROOT, env=child_env(), text=True,
                          capture_output=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_run"] == len(EVAL_TASKS) - len(first)  # finished tasks were skipped
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert sorted(r["instance_id"] for r in rows) == sorted(EVAL_TASKS)
    assert all(r["resolved"] and r["error_kind"] is None for r in rows), rows


def test_a_container_stopped_under_an_episode_is_an_infrastructure_error(image: str) -> None:
    box = DockerSandbox(SandboxConfig(image=image))
    try:
        assert box.run("echo up").output == "up\n"
        box.container.kill()
        with pytest.raises(SandboxLost, match="run the episode again"):
            box.run("echo again")
    finally:
        box.close()
