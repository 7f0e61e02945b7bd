"""Who owns a container, whether that owner still lives, and removing what dead owners left.

Every container carries its owner's host, pid and process start time in labels. A container
is a leftover only when its owner ran on this host and that process is gone (the start time
guards against a recycled pid). Containers of live owners are never touched.
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import docker.errors

from repogym.sandbox.base import LABEL_HOST, LABEL_MANAGED, LABEL_PID, LABEL_PREFIX
from repogym.sandbox.client import docker_client

LABEL_START = f"{LABEL_PREFIX}.owner-start"
# Labels every container of this process carries besides the owner's (a cluster worker names
# itself, so the driver can remove what a lost worker left on its engine).
PROCESS_LABELS: dict[str, str] = {}


def process_start(pid: int) -> str:
    """The kernel's start time of ``pid`` (clock ticks since boot), or "" when unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return fields[19].decode()
    except (OSError, IndexError):
        return ""


def owner_labels() -> dict[str, str]:
    pid = os.getpid()
    return {
        LABEL_MANAGED: "1",
        LABEL_HOST: socket.gethostname(),
        LABEL_PID: str(pid),
        LABEL_START: process_start(pid),
        **PROCESS_LABELS,
    }


def owner_alive(labels: dict[str, str]) -> bool:
    """True unless the owner certainly ran on this host and is gone."""
    if labels.get(LABEL_HOST) != socket.gethostname():
        return True  # another machine's container: not ours to judge
    try:
        pid = int(labels.get(LABEL_PID, ""))
    except ValueError:
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    started = labels.get(LABEL_START, "")
    return not started or process_start(pid) == started


@dataclass(frozen=True)
class ContainerRef:
    id: str
    name: str
    labels: dict[str, str]


def leftovers(client: Any, include_live: bool = False) -> list[ContainerRef]:
    """Containers made by repogym whose owner is dead (or all of them with ``include_live``).

    Listed in one call (no per-container inspect), so containers that disappear meanwhile do
    not break the listing.
    """
    rows = client.api.containers(all=True, filters={"label": f"{LABEL_MANAGED}=1"})
    found = [ContainerRef(r["Id"], (r.get("Names") or ["?"])[0].lstrip("/"), r.get("Labels") or {})
             for r in rows]
    return [c for c in found if include_live or not owner_alive(c.labels)]


def remove_containers(containers: list[ContainerRef], client: Any = None) -> list[str]:
    """Removes ``containers`` from ``client``'s engine (default: this process's engine)."""
    removed = []
    for container in containers:
        try:
            api = client.api if client is not None else container_api(container)
            api.remove_container(container.id, force=True, v=True)
            removed.append(container.name)
        except docker.errors.NotFound:
            removed.append(container.name)
        except docker.errors.APIError as exc:
            if "already in progress" in str(exc):
                removed.append(container.name)
    return removed


def container_api(_ref: ContainerRef) -> Any:
    return docker_client().api


# --- this process's own containers, removed at exit and on SIGTERM/SIGHUP -------------------

_live: dict[str, Callable[[], None]] = {}
_lock = threading.Lock()
_installed = False


def track(key: str, closer: Callable[[], None]) -> None:
    global _installed
    with _lock:
        _live[key] = closer
        if not _installed:
            _installed = True
            atexit.register(close_all)
            _install_signal_handlers()


def _forget_after_fork() -> None:
    """A forked child (a vector env worker, a process pool) must not remove its parent's
    containers when it exits or is terminated."""
    global _lock
    _lock = threading.Lock()
    _live.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


def untrack(key: str) -> None:
    with _lock:
        _live.pop(key, None)


def close_all() -> None:
    with _lock:
        closers = list(_live.values())
        _live.clear()
    for closer in closers:
        try:
            closer()
        except Exception:  # noqa: BLE001 - at exit, keep removing the others
            continue


def _install_signal_handlers() -> None:
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is signal.SIG_DFL:
            signal.signal(sig, _exit_on_signal)


def _exit_on_signal(signum: int, frame: object) -> None:
    close_all()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
