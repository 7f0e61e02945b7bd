"""Rootless Podman as the engine: finding its socket, what a container is created with there,
the limits that stand in for the ones it cannot set, and one engine per process. The
hardening itself is tested on the real engine in test_docker_sandbox.py (``engine`` fixture)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import docker.types
import pytest

from repogym.errors import DockerUnavailable, SandboxError
from repogym.sandbox import client, podman
from repogym.sandbox.engines import Engine
from repogym.sandbox.features import NPROC_FLOOR, EngineFeatures, limit_options

DOCKER = EngineFeatures("docker", "20.10")
ROOTLESS_V1 = EngineFeatures("podman", "4.3.1", rootless=True, cgroup_version="1",
                             limits=frozenset())


def test_limits_are_the_engines_where_it_enforces_them() -> None:
    options = limit_options(DOCKER, "2g", 1.5, 256)
    assert options == {"mem_limit": "2g", "memswap_limit": "2g", "nano_cpus": 1_500_000_000,
                       "pids_limit": 256}


def test_rlimits_stand_in_where_the_engine_cannot_limit() -> None:
    options = limit_options(ROOTLESS_V1, "2g", 1.0, 256)
    # nothing the engine would accept and then ignore (or refuse, on cgroup v2)
    assert not {"mem_limit", "memswap_limit", "nano_cpus", "pids_limit"} & set(options)
    ulimits = {u["Name"]: (u["Soft"], u["Hard"]) for u in options["ulimits"]}
    assert ulimits == {"data": (2 << 30, 2 << 30), "nproc": (NPROC_FLOOR, NPROC_FLOOR)}
    partial = EngineFeatures("podman", "5.0", limits=frozenset({"memory", "pids"}))
    assert set(limit_options(partial, "1g", 1.0, 2048)) == {"mem_limit", "memswap_limit",
                                                             "pids_limit"}


def test_every_hardening_reaches_podmans_spec() -> None:
    spec = podman._spec("img", {
        "command": ["sleep", "infinity"], "name": "repogym-x", "detach": True, "init": True,
        "labels": {"a": "1"}, "working_dir": "/testbed", "network_mode": "none",
        "cap_drop": ["ALL"], "cap_add": ["CHOWN"], "security_opt": ["no-new-privileges"],
        "read_only": True, "tmpfs": {"/tmp": "size=256m,mode=1777"},
        "environment": {"K": "v"}, "stop_signal": "SIGKILL",
        "ulimits": [docker.types.Ulimit(name="nproc", soft=9, hard=9)],
        "mem_limit": "1g", "memswap_limit": "1g", "nano_cpus": 500_000_000, "pids_limit": 64})
    assert spec["cap_drop"] == ["ALL"] and spec["cap_add"] == ["CHOWN"]
    assert spec["no_new_privileges"] is True and spec["read_only_filesystem"] is True
    assert spec["read_only_tmpfs"] is False  # no writable /run, /var/tmp of Podman's own
    assert spec["netns"] == {"nsmode": "none"} and spec["init"] is True
    assert spec["mounts"] == [{"destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
                               "options": ["size=256m", "mode=1777"]}]
    assert spec["r_limits"] == [{"type": "nproc", "soft": 9, "hard": 9}]
    assert spec["resource_limits"] == {"memory": {"limit": 1 << 30, "swap": 1 << 30},
                                       "cpu": {"quota": 50_000, "period": 100_000},
                                       "pids": {"limit": 64}}
    assert spec["labels"] == {"a": "1"} and spec["stop_signal"] == 9


def test_an_option_podman_is_not_given_is_refused_not_dropped() -> None:
    with pytest.raises(SandboxError, match="does not translate.*privileged"):
        podman.run_container(object(), "4.3.1", "img", privileged=True)


def _listening_socket(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    return sock


def test_the_socket_is_the_setting_then_the_users_own(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPOGYM_PODMAN_HOST", "unix:///somewhere/podman.sock")
    assert podman.podman_engine() == Engine("unix:///somewhere/podman.sock")
    monkeypatch.delenv("REPOGYM_PODMAN_HOST")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    (tmp_path / "podman").mkdir()
    with _listening_socket(tmp_path / "podman" / "podman.sock"):
        assert podman.podman_engine() == Engine(f"unix://{tmp_path}/podman/podman.sock")


def test_no_socket_says_where_it_looked_and_how_to_start_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REPOGYM_PODMAN_HOST", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.setattr(podman, "candidate_sockets", lambda: [str(tmp_path / "none.sock")])
    with pytest.raises(DockerUnavailable) as caught:
        podman.podman_engine()
    assert "none.sock" in str(caught.value) and "podman system service" in str(caught.value)


def test_a_process_runs_on_one_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPOGYM_PODMAN_HOST", f"unix://{tmp_path}/podman.sock")
    monkeypatch.setattr(client, "_chosen", {})
    client.use_engine_of("docker")  # the default engine: nothing to choose
    assert client._chosen == {}
    client.use_engine_of("podman")
    assert client._chosen[os.getpid()] == Engine(f"unix://{tmp_path}/podman.sock")
    client.use_engine_of("podman")  # the same engine again: fine
    monkeypatch.setattr(client, "_chosen", {os.getpid(): None})
    with pytest.raises(ValueError, match="one engine"):
        client.use_engine_of("podman")


def test_the_backend_setting_picks_podman(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPOGYM_PODMAN_HOST", f"unix://{tmp_path}/podman.sock")
    monkeypatch.setenv("REPOGYM_BACKEND", "podman")
    monkeypatch.setattr(client, "_chosen", {})
    assert client.current_engine() == Engine(f"unix://{tmp_path}/podman.sock")
