"""The Docker sandbox against a real engine, Docker and rootless Podman (the ``engine``
fixture): isolation, limits, the shell, files, cleanup."""

from __future__ import annotations

import os
import resource
import socket
import threading
import time
from pathlib import Path

import pytest

from repogym.sandbox import owners
from repogym.sandbox.base import (
    LABEL_HOST,
    LABEL_MANAGED,
    LABEL_PID,
    LABEL_RUN,
    SandboxConfig,
    parse_size,
)
from repogym.sandbox.client import docker_client
from repogym.sandbox.docker import DockerSandbox
from repogym.sandbox.features import NPROC_FLOOR, engine_features

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def box(engine: str, toy_image: str):
    sandbox = DockerSandbox(SandboxConfig(image=toy_image, run_id="test-sandbox"))
    yield sandbox
    sandbox.close()


def test_runs_as_unprivileged_user_in_the_repository(box: DockerSandbox) -> None:
    result = box.run("id -u; pwd; ls")
    uid, cwd, *files = result.output.split()
    assert uid != "0" and cwd == "/testbed" and "calc" in files


def test_state_persists(box: DockerSandbox) -> None:
    box.run("cd /tmp && export MARK=42")
    assert box.run("pwd; echo $MARK").output == "/tmp\n42\n"
    box.run("cd /testbed")


def test_timeout_returns_on_time_and_shell_survives(box: DockerSandbox) -> None:
    start = time.monotonic()
    result = box.run("sleep 1000", timeout=2)
    assert result.timed_out
    # cut short, not waited out (a machine under load takes seconds more)
    assert time.monotonic() - start < 60
    assert box.run("echo next").output == "next\n"


def test_timeouts_hold_after_the_strays_and_the_timer_were_killed(box: DockerSandbox) -> None:
    # a stray makes the shell end every other process of the user, its timer included
    assert box.run("setsid sleep 100 & echo left").output == "left\n"
    start = time.monotonic()
    assert box.run("sleep 1000", timeout=2).timed_out
    # cut short, not waited out (a machine under load takes seconds more)
    assert time.monotonic() - start < 60
    assert box.run("echo next").output == "next\n"


def test_large_output_is_capped_without_host_memory_growth(box: DockerSandbox) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = box.run("head -c 50000000 /dev/zero | tr '\\0' x", timeout=60)
    grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert result.n_bytes == 50_000_000 and result.truncated
    assert len(result.output) < 40_000
    assert grown_kb < 8_000, f"host memory grew by {grown_kb} kB for 50 MB of output"


def test_no_network(box: DockerSandbox) -> None:
    probe = ("python3 -c \"import socket; s=socket.socket(); s.settimeout(3); "
             "s.connect(('1.1.1.1', 53))\" 2>&1 | tail -1")
    assert "unreachable" in box.run(probe).output.lower()


def test_fork_bomb_is_contained(box: DockerSandbox) -> None:
    box.run(":(){ :|:& };:", timeout=5)
    assert box.run("echo alive", timeout=30).output == "alive\n"


def test_a_fork_bomb_leaves_other_containers_alone(box: DockerSandbox, toy_image: str) -> None:
    # rootless Podman counts processes per user namespace: with one shared by all containers,
    # a bomb in one took the count of every container's unprivileged user
    other = DockerSandbox(SandboxConfig(image=toy_image, run_id="test-sandbox"))
    try:
        bomb = threading.Thread(target=other.run, args=(":(){ :|:& };:; sleep 12",),
                                kwargs={"timeout": 12})
        bomb.start()
        time.sleep(4)  # the bomb holds its container's whole process count by now
        forks = box.run("for i in $(seq 40); do sleep 2 & done 2>&1; wait; echo forked",
                        timeout=30)
        bomb.join()
    finally:
        other.close()
    assert forks.output == "forked\n", forks.output[-300:]


def test_history_holds_one_commit(box: DockerSandbox) -> None:
    for command in ("git log --all --oneline", "git rev-list --all"):
        assert len(box.run(command).output.splitlines()) == 1
    assert box.run("git reflog | wc -l").output.strip() == "0"
    assert box.run("git branch -a").output.split() == ["*", "main"]
    assert box.run("git remote").output == ""


def test_kill_all_recovers(box: DockerSandbox) -> None:
    result = box.run("kill -9 -1")
    assert result.shell_restarted
    assert box.run("echo back").output == "back\n"


def test_files_copy_and_diff(box: DockerSandbox, toy_task, tmp_path: Path) -> None:
    box.write_file("calc/extra.py", b"X = '\xff'\n")
    assert box.read_file("calc/extra.py") == b"X = '\xff'\n"
    with pytest.raises(FileNotFoundError):
        box.read_file("nope.txt")
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "f.txt").write_text("in")
    box.copy_in(tmp_path / "folder", "/tmp/in")
    assert box.run("cat /tmp/in/folder/f.txt").output == "in"
    box.copy_out("/testbed/calc/extra.py", tmp_path / "out")
    assert (tmp_path / "out" / "extra.py").read_bytes() == b"X = '\xff'\n"
    diff = box.diff(box.run("git rev-parse HEAD").output.strip())
    assert "calc/extra.py" in diff and "\udcff" in diff
    box.run("rm calc/extra.py")


def test_limits_and_labels(box: DockerSandbox) -> None:
    attrs = docker_client().api.inspect_container(box.container.id)
    host = attrs["HostConfig"]
    assert "no-new-privileges" in host["SecurityOpt"][0]
    assert host["NetworkMode"] == "none"
    features = engine_features(docker_client())
    rlimits = {u["Name"].removeprefix("RLIMIT_").lower(): u["Hard"]
               for u in host.get("Ulimits") or []}
    # each limit is the engine's where it enforces it, the kernel's rlimit where it does not
    if "pids" in features.limits:
        assert host["PidsLimit"] == 256
    else:
        assert rlimits["nproc"] == NPROC_FLOOR
    if "memory" in features.limits:
        assert host["Memory"] == parse_size("2g")
    else:
        assert rlimits["data"] == parse_size("2g")
    assert ("cpu" not in features.limits) or host["NanoCpus"] > 0
    # what the processes get: no capability, no new privileges, the stand-in rlimits
    status = box.run("grep -E '^(CapEff|CapBnd|NoNewPrivs)' /proc/self/status").output
    assert "CapEff:\t0000000000000000" in status and "NoNewPrivs:\t1" in status
    limits = box.run("cat /proc/self/limits").output
    for name, row in (("nproc", "Max processes"), ("data", "Max data size")):
        if name in rlimits:
            assert f"{row}" in limits and str(rlimits[name]) in limits.split(row)[1][:40]
    labels = attrs["Config"]["Labels"]
    assert labels[LABEL_RUN] == "test-sandbox" and labels[LABEL_PID] == str(os.getpid())
    assert labels[LABEL_HOST] == socket.gethostname()
    assert box.name.startswith("repogym-test-sandbox-")


def test_close_removes_the_container_and_is_idempotent(engine: str, toy_image: str) -> None:
    sandbox = DockerSandbox(SandboxConfig(image=toy_image))
    cid = sandbox.container.id
    sandbox.close()
    sandbox.close()
    assert not docker_client().api.containers(all=True, filters={"id": cid})


def test_cleanup_removes_dead_owners_only(engine: str, toy_image: str) -> None:
    client = docker_client()
    dead = client.containers.create(toy_image, ["sleep", "1"], name="repogym-deadowner-x",
                                    labels={LABEL_MANAGED: "1", LABEL_HOST: socket.gethostname(),
                                            LABEL_PID: "999999999"})
    live = DockerSandbox(SandboxConfig(image=toy_image, run_id="live"))
    try:
        removed = owners.remove_containers(owners.leftovers(client))
        assert dead.name in removed and live.name not in removed
        assert live.alive()
    finally:
        live.close()
        owners.remove_containers([owners.ContainerRef(dead.id, dead.name, {})])
