"""The sandbox's limits and recovery paths that the hostile tests rely on: configuration
checks, errors when the engine is gone, the read-only root and its fallback, and what an
in-place reset must clear."""

from __future__ import annotations

import docker
import pytest
from reliability_support import wait_until

from repogym.errors import DockerUnavailable
from repogym.images.python_base import ensure_base
from repogym.sandbox.base import SandboxConfig
from repogym.sandbox.client import docker_client
from repogym.sandbox.docker import DockerSandbox
from repogym.sandbox.pool import SandboxPool, reset_in_place


def test_config_keeps_room_for_processes_and_a_writable_repository() -> None:
    with pytest.raises(ValueError, match="lower tmpfs_size"):
        SandboxConfig(image="x", memory="1g")
    SandboxConfig(image="x", memory="1g", read_only=False)  # no tmpfs besides /tmp then
    with pytest.raises(ValueError, match="not a size"):
        SandboxConfig(image="x", tmpfs_size="lots")
    with pytest.raises(ValueError, match="workdir"):
        SandboxConfig(image="x", workdir="/src")
    with pytest.raises(ValueError, match="absolute path"):
        SandboxConfig(image="x", writable=(("/testbed", "1g"), ("/", "1g")))


def test_an_engine_that_does_not_answer_raises_docker_unavailable() -> None:
    gone = docker.DockerClient(base_url="unix:///tmp/repogym-no-engine.sock", version="1.41")
    with pytest.raises(DockerUnavailable):
        DockerSandbox(SandboxConfig(image="x"), client=gone)



@pytest.mark.docker
def test_root_is_read_only_with_sized_writable_paths(image: str) -> None:
    with DockerSandbox(SandboxConfig(image=image)) as box:
        host = docker_client().api.inspect_container(box.container.id)["HostConfig"]
        assert host["ReadonlyRootfs"] is True
        assert "size=1g" in host["Tmpfs"]["/testbed"] and "size=256m" in host["Tmpfs"]["/tmp"]
        out = box.run("git status --short | wc -l; stat -c %U /testbed /testbed/minicalc; "
                      "touch /testbed/new ~/new /tmp/new /var/tmp/new && echo writable").output
        assert out.split() == ["0", "repogym", "repogym", "writable"], out


@pytest.mark.docker
def test_an_image_without_a_pristine_copy_gets_a_writable_root() -> None:
    base = ensure_base(progress=lambda _m: None).tag
    with pytest.warns(UserWarning, match="no pristine copy"):
        box = DockerSandbox(SandboxConfig(image=base))
    with box:
        assert not box.read_only
        assert box.run("touch /testbed/x && echo ok").output == "ok\n"


@pytest.mark.docker
def test_reset_clears_ipc_objects_and_message_queues(image: str) -> None:
    pool = SandboxPool(size=0, reuse=True)
    try:
        box = pool.acquire(image)
        made = box.run("ipcmk -M 4096 && ipcmk -Q && ipcmk -S 1 && "
                       "python3 -c \"import os; os.mkfifo('/dev/shm/left')\"; "
                       "ipcs -m -q -s | grep -c '^0x'")
        assert made.output.strip().endswith("3"), made.output
        first = box.container.id
        pool.release(box)
        assert wait_until(lambda: pool.stats["reused"] == 1, 60), pool.stats
        again = pool.acquire(image)
        assert again.container.id == first
        left = again.run("ipcs -m -q -s | grep -c '^0x'; "
                         "find /dev/shm /dev/mqueue -mindepth 1 | wc -l")
        assert left.output.split() == ["0", "0"], left.output
        pool.release(again)
    finally:
        pool.close()


@pytest.mark.docker
def test_a_writable_root_reset_still_checks_the_layer(image: str) -> None:
    pool = SandboxPool(size=0, reuse=True, read_only=False)
    try:
        box = pool.acquire(image)
        assert box.run("echo mine > /testbed/x && echo ok").output == "ok\n"
        assert reset_in_place(box)  # only restored paths changed
        assert box.run("echo planted > /run/lock/x && echo ok").output == "ok\n"
        assert not reset_in_place(box)  # a change outside them
        box.close()
    finally:
        pool.close()
