"""What the reliability tests share: the containers a test owns, a mixed agent, replicated
tasks, a second Docker engine, and a watch on exceptions raised in background threads."""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from repogym.agents.gold import GoldAgent
from repogym.agents.random_agent import RandomAgent
from repogym.sandbox.base import LABEL_MANAGED, LABEL_PID, LABEL_RUN
from repogym.sandbox.client import docker_client
from repogym.schema import Task

REPO_ROOT = Path(__file__).resolve().parents[2]


def containers(label: str, value: str, client: Any = None) -> list[str]:
    """Names of the repogym containers whose ``label`` is ``value`` (one list call, no inspect:
    other processes remove containers meanwhile)."""
    api = (client or docker_client()).api
    rows = api.containers(all=True, filters={"label": [f"{LABEL_MANAGED}=1", f"{label}={value}"]})
    return sorted((r.get("Names") or ["?"])[0].lstrip("/") for r in rows)


def run_containers(run_id: str) -> list[str]:
    return containers(LABEL_RUN, run_id)


def pid_containers(pid: int, client: Any = None) -> list[str]:
    return containers(LABEL_PID, str(pid), client)


def wait_until(predicate: Callable[[], bool], seconds: float, step: float = 0.2) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


def replicas(tasks: list[Task], n: int) -> list[Task]:
    """``n`` tasks cycling through ``tasks``, each with its own id (``ID--rK``)."""
    out = []
    for i in range(n):
        task = tasks[i % len(tasks)]
        out.append(dataclasses.replace(task, instance_id=f"{task.instance_id}--r{i // len(tasks)}"))
    return out


def base_id(instance_id: str) -> str:
    return instance_id.split("--r", 1)[0]


def plays_gold(instance_id: str) -> bool:
    return int(instance_id.rsplit("--r", 1)[1]) % 2 == 0 if "--r" in instance_id else True


class MixedAgent:
    """Gold on even replicas (``--r0``, ``--r2``, ...), random on odd ones."""

    def __init__(self, tasks: dict[str, Task] | None = None, seed: int = 0) -> None:
        self.gold = GoldAgent(tasks)
        self.random = RandomAgent(seed=seed, min_steps=1, max_steps=3)
        self.current: Any = self.gold

    def reset(self, obs: str, info: dict[str, Any]) -> None:
        self.current = self.gold if plays_gold(str(info.get("task_id"))) else self.random
        self.current.reset(obs, info)

    def act(self, obs: str, info: dict[str, Any]) -> Any:
        return self.current.act(obs, info)


@contextmanager
def thread_exceptions() -> Iterator[list[str]]:
    """Collects exceptions that escape any thread while the block runs."""
    seen: list[str] = []
    previous = threading.excepthook

    def hook(args: threading.ExceptHookArgs) -> None:
        seen.append(f"{args.thread.name if args.thread else '?'}: {args.exc_type.__name__}: "
                    f"{args.exc_value}")
        previous(args)

    threading.excepthook = hook
    try:
        yield seen
    finally:
        threading.excepthook = previous


def repogym_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "repogym", *args]


def child_env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **extra}
    env.pop("REPOGYM_RUN_ID", None)
    return env


def stop(proc: subprocess.Popen[Any], sig: int = signal.SIGTERM, wait: float = 60) -> int:
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        return proc.wait(wait)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(10)


def have(binary: str) -> bool:
    return shutil.which(binary) is not None


class SecondEngine:
    """A Docker engine of our own beside the machine's: its own data, state, socket and bridge.

    Never ``--bridge=none``: at start-up that makes dockerd delete the host's ``docker0``
    interface, which belongs to the machine's engine. A bridge of our own, with an address of
    our own, keeps both engines apart; no iptables rules are touched.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.bridge = f"rgd{os.getpid() % 100000}"
        self.subnet = f"100.117.{os.getpid() % 250}.1/24"  # shared address space, never routed
        self.host = f"unix://{root}/docker.sock"
        self.extra_args: list[str] = []  # more dockerd flags (another listener, TLS)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, seconds: float = 60) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "daemon.json").write_text("{}")
        if subprocess.run(["ip", "link", "show", self.bridge], capture_output=True).returncode:
            for cmd in (["link", "add", self.bridge, "type", "bridge"],
                        ["addr", "add", self.subnet, "dev", self.bridge],
                        ["link", "set", self.bridge, "up"]):
                subprocess.run(["ip", *cmd], check=True, capture_output=True)
        log = (self.root / "dockerd.log").open("ab")
        self.proc = subprocess.Popen(
            ["dockerd", "--config-file", f"{self.root}/daemon.json",
             "--data-root", f"{self.root}/data", "--exec-root", f"{self.root}/exec",
             "--pidfile", f"{self.root}/dockerd.pid", "-H", self.host,
             f"--bridge={self.bridge}", "--iptables=false", "--ip-masq=false",
             "--ip-forward=false", "--userland-proxy=false", *self.extra_args],
            stdout=log, stderr=subprocess.STDOUT)
        if not wait_until(self._answers, seconds, 0.3):
            raise RuntimeError(f"the second engine did not start: see {self.root}/dockerd.log")

    def _answers(self) -> bool:
        return subprocess.run(["docker", "-H", self.host, "version"], capture_output=True,
                              timeout=30).returncode == 0

    def stop(self) -> None:
        if self.proc is not None:
            stop(self.proc, signal.SIGTERM, wait=60)
            self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def load(self, tag: str) -> None:
        """Copies an image from the machine's engine."""
        save = subprocess.Popen(["docker", "save", tag], stdout=subprocess.PIPE)
        subprocess.run(["docker", "-H", self.host, "load", "-q"], stdin=save.stdout, check=True,
                       capture_output=True, timeout=600)
        assert save.wait(60) == 0

    def containers(self) -> list[str]:
        done = subprocess.run(["docker", "-H", self.host, "ps", "-aq"], capture_output=True,
                              text=True, timeout=60, check=True)
        return done.stdout.split()

    def close(self) -> None:
        """Stops the engine, removes its containers, bridge and files."""
        try:
            if self.proc is not None and self.containers():
                subprocess.run(["docker", "-H", self.host, "rm", "-f", *self.containers()],
                               capture_output=True, timeout=120)
        finally:
            self.stop()
            subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)
            shutil.rmtree(self.root, ignore_errors=True)
