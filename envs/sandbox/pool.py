"""Warm containers: started ahead of time per (image, role), handed out on ``acquire``.

A used container is never handed out as it is. With ``reuse=True`` it is reset in place in the
background: every process of the agent's user killed, the repository and the user's home put
back from the pristine copy the image carries, the temporary folders emptied, and the result
verified: no agent process left, the repository identical to the pristine copy, and no change
in the container's writable layer outside the paths that were just restored (``docker diff``).
A container whose reset cannot be verified is removed instead.
"""

from __future__ import annotations

import queue
import threading
from collections import defaultdict
from typing import Any

from repogym.envs.sandbox.base import SandboxConfig
from repogym.envs.sandbox.docker import DockerSandbox
from repogym.errors import RepogymError

PRISTINE = "/opt/repogym-pristine"
# Paths the reset restores; a change anywhere else makes the container unusable.
RESTORED = ("/testbed", "/home/repogym", "/tmp", "/var/tmp", "/dev/shm", "/root", "/opt/repogym-grade")
RESET_CAPS = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL")

RESET_SCRIPT = f"""set -u
[ -d {PRISTINE}/testbed ] || {{ echo NO_PRISTINE; exit 3; }}
pkill -9 -u repogym 2>/dev/null; for i in 1 2 3 4 5; do pgrep -u repogym >/dev/null || break; \
sleep 0.02; pkill -9 -u repogym 2>/dev/null; done
pgrep -u repogym >/dev/null && {{ echo PROCESSES_LEFT; exit 4; }}
rm -rf /testbed /home/repogym || exit 5
cp -a {PRISTINE}/testbed /testbed && cp -a {PRISTINE}/home /home/repogym || exit 6
find /tmp /var/tmp /dev/shm -mindepth 1 -delete 2>/dev/null
diff -rq --no-dereference {PRISTINE}/testbed /testbed >/dev/null || {{ echo TREE_DIFFERS; exit 7; }}
echo RESET_OK
"""


class SandboxPool:
    """Started containers per (image, role); ``size`` kept ready for each."""

    def __init__(self, size: int = 0, reuse: bool = True, grader_size: int = 0, **config: Any):
        if size < 0 or grader_size < 0:
            raise ValueError(f"pool sizes must be >= 0 (size={size}, grader_size={grader_size})")
        self.size, self.reuse, self.config = size, reuse, config
        self.sizes = {"agent": size, "grader": grader_size}
        self._ready: dict[tuple[str, str], queue.Queue[DockerSandbox]] = defaultdict(queue.Queue)
        self._configs: dict[tuple[str, str], dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._workers: list[threading.Thread] = []
        self._fillers: dict[tuple[str, str], threading.Thread] = {}
        self.stats = {"hits": 0, "misses": 0, "reused": 0, "discarded": 0}

    def _new(self, key: tuple[str, str]) -> DockerSandbox:
        image, role = key
        cfg = {**self.config, **self._configs.get(key, {})}
        if self.reuse and role == "agent":
            cfg["cap_add"] = tuple(sorted(set(cfg.get("cap_add", ())) | set(RESET_CAPS)))
        box = DockerSandbox(SandboxConfig(image=image, role=role, **cfg))
        if self.reuse and role == "agent":
            # what the engine itself changed (init binary, /etc/hosts, ...) before any agent
            box.baseline_changes = {c.get("Path", "") for c in box.container.diff() or []}
        return box

    def acquire(self, image: str, role: str = "agent", **overrides: Any) -> DockerSandbox:
        key = (image, role)
        if overrides:
            self._configs[key] = {**self._configs.get(key, {}), **overrides}
        box: DockerSandbox | None = None
        try:
            box = self._ready[key].get_nowait()
            self.stats["hits"] += 1
        except queue.Empty:
            self.stats["misses"] += 1
        self._refill(key)
        if box is not None:
            if box.alive():
                return box
            box.close()
        return self._new(key)

    def release(self, box: Any) -> None:
        """Takes a used sandbox back: reset in place in the background, or removed."""
        if not isinstance(box, DockerSandbox):
            box.close()
            return
        worker = threading.Thread(target=self._recycle, args=(box,), daemon=True)
        with self._lock:
            self._workers = [w for w in self._workers if w.is_alive()] + [worker]
        worker.start()

    def _recycle(self, box: DockerSandbox) -> None:
        key = (box.config.image, box.config.role)
        usable = (self.reuse and not self._closed and box.config.role == "agent"
                  and self._ready[key].qsize() < max(self.size, 1) and reset_in_place(box))
        if usable and not self._closed:
            self.stats["reused"] += 1
            self._ready[key].put(box)
        else:
            self.stats["discarded"] += 1
            box.close()

    def _refill(self, key: tuple[str, str]) -> None:
        if self.sizes.get(key[1], 0) <= 0 or self._closed:
            return
        with self._lock:
            thread = self._fillers.get(key)
            if thread is not None and thread.is_alive():
                return
            thread = threading.Thread(target=self._fill, args=(key,), daemon=True)
            self._fillers[key] = thread
            thread.start()

    def _fill(self, key: tuple[str, str]) -> None:
        while not self._closed and self._ready[key].qsize() < self.sizes.get(key[1], 0):
            try:
                box = self._new(key)
            except RepogymError:
                return
            if self._closed:
                box.close()
                return
            self._ready[key].put(box)

    def warm(self, image: str, role: str = "agent", **overrides: Any) -> None:
        """Starts filling the pool for ``image`` before the first ``acquire``."""
        if overrides:
            self._configs[(image, role)] = overrides
        self._refill((image, role))

    def close(self) -> None:
        self._closed = True
        for thread in [*self._fillers.values(), *self._workers]:
            thread.join(timeout=60)
        for q in self._ready.values():
            while True:
                try:
                    q.get_nowait().close()
                except queue.Empty:
                    break


def reset_in_place(box: DockerSandbox) -> bool:
    """Restores a used container to the image's state and verifies it (see the module doc)."""
    try:
        result = box.exec(["bash", "-c", RESET_SCRIPT], user="root", timeout=60)
        if result.exit_code != 0 or "RESET_OK" not in result.output:
            return False
        if box.baseline_changes is None:
            return False  # not started by a pool: nothing to compare the layer with
        changes = box.container.diff() or []
        for change in changes:
            path = change.get("Path", "")
            if path in box.baseline_changes:
                continue
            if not any(
                    path == p or path.startswith(p + "/") or p.startswith(path + "/")
                    for p in RESTORED):
                return False
        box.restart_shell()
    except RepogymError:
        return False
    return box.alive()
