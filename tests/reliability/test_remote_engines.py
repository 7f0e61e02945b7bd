"""Engines other than the local one: a second engine on this machine, reached over TCP with
TLS, stands in for a remote host. Episodes run and are graded there with the same protections,
the image arrives by its content hash, an engine that does not answer is taken out, and
`repogym doctor --cleanup` removes leftovers on every listed engine."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import docker
import gymnasium as gym
import pytest
from cluster_support import TLSEngine, free_port, labelled
from reliability_support import REPO_ROOT, child_env, repogym_cmd

from repogym.sandbox import client as client_module
from repogym.sandbox import engines
from repogym.sandbox.base import LABEL_MANAGED, LABEL_ROLE, LABEL_RUN
from repogym.schema import Task

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture()
def listed(tls_engine: TLSEngine, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """This process's engines: the second one over TLS, then one that does not answer; images
    may come from the machine's engine. The choice made is undone afterwards."""
    dead = f"tcp://127.0.0.1:{free_port()}?slots=8"
    hosts = f"{tls_engine.tls_spec(slots=4)}, {dead}"
    monkeypatch.setenv(engines.HOSTS_VAR, hosts)
    monkeypatch.setenv(engines.SOURCES_VAR, "unix:///var/run/docker.sock")
    monkeypatch.setattr(client_module, "_chosen", {})
    monkeypatch.setattr(engines, "_out", {})
    yield hosts


def test_an_episode_runs_and_is_graded_on_a_tls_engine_with_its_image_sent_by_hash(
        listed: str, tls_engine: TLSEngine, toy_task: Task, toy_image: str) -> None:
    remote = docker.DockerClient(base_url=tls_engine.host)
    env: Any = gym.make("repogym/SWE-v0", tasks=[toy_task], run_id="tlsremote", pool_size=0)
    try:
        obs, info = env.reset(seed=0)
        chosen = client_module.current_engine()
        assert chosen is not None and chosen.url.startswith("tcp://127.0.0.1:")  # the TLS one
        assert engines.is_out(engines.parse_engines(listed)[1].url)  # the silent one is out
        # the episode's container is on the second engine, hardened as everywhere
        # (the episode's grading container, started in the background, carries the run too)
        [name] = (set(labelled(tls_engine.host, LABEL_RUN, "tlsremote"))
                  & set(labelled(tls_engine.host, LABEL_ROLE, "agent")))
        attrs = remote.api.inspect_container(name)
        assert attrs["HostConfig"]["NetworkMode"] == "none"
        assert attrs["HostConfig"]["CapDrop"] == ["ALL"] and attrs["HostConfig"]["ReadonlyRootfs"]
        assert not labelled("unix:///var/run/docker.sock", LABEL_RUN, "tlsremote")
        # the image arrived as the very image the tag names
        local = docker.DockerClient(base_url="unix:///var/run/docker.sock")
        assert remote.images.get(toy_image).id == local.images.get(toy_image).id
        env.step({"tool": "str_replace", "path": "calc/__init__.py", "old_str": "return a - b",
                  "new_str": "return a + b"})
        _, reward, terminated, _, info = env.step({"tool": "submit"})
        assert terminated and reward == 1.0 and info["resolved"]
    finally:
        env.close()
    assert not labelled(tls_engine.host, LABEL_RUN, "tlsremote")


def test_free_slots_count_the_episodes_running_on_the_engine(
        listed: str, tls_engine: TLSEngine, toy_image: str) -> None:
    from repogym.sandbox.base import SandboxConfig
    from repogym.sandbox.docker import DockerSandbox

    engine = engines.parse_engines(listed)[0]
    # the image as the env's image provider would send it (this test starts no env)
    assert engines.copy_image(toy_image, engines.make_client(engine))
    before = engines.free_slots(engine)
    box = DockerSandbox(SandboxConfig(image=toy_image, run_id="tlsslots"))
    try:
        assert engines.free_slots(engine) == before - 1
    finally:
        box.close()
    assert engines.free_slots(engine) == before


LEAVE_ONE = """
import os
from repogym.sandbox.base import SandboxConfig
from repogym.sandbox.docker import DockerSandbox
box = DockerSandbox(SandboxConfig(image={image!r}, run_id="tlsleft"))
print(box.name, flush=True)
os._exit(0)  # dies without removing it, as a crashed process would
"""


def test_doctor_cleanup_covers_every_listed_engine(
        listed: str, tls_engine: TLSEngine, toy_image: str) -> None:
    env = child_env(**{engines.HOSTS_VAR: listed})
    assert engines.copy_image(toy_image, engines.make_client(engines.parse_engines(listed)[0]))
    made = subprocess.run([sys.executable, "-c", LEAVE_ONE.format(image=toy_image)], env=env,
                          capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)
    assert made.returncode == 0, made.stderr
    name = made.stdout.split()[-1]
    assert labelled(tls_engine.host, LABEL_MANAGED, "1") == [name]
    done = subprocess.run(repogym_cmd("doctor", "--cleanup", "--json", "-"), env=env,
                          capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)
    assert done.returncode == 1  # one listed engine does not answer: said, not hidden
    report = json.loads(done.stdout[done.stdout.index("{"):])
    by_url = {e["url"]: e for e in report["engines"]}
    [tls, dead] = engines.parse_engines(listed)
    assert by_url[tls.url]["removed"] == [name] and "error" in by_url[dead.url]
    assert not labelled(tls_engine.host, LABEL_MANAGED, "1")
