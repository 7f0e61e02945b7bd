"""Warm containers: started ahead of time per (image, role), handed out on ``acquire``.

A used container is never handed out as it is. With ``reuse=True`` it is reset in place in the
background: every process of the agent's user killed, the repository and the user's home put
back from the pristine copy the image carries, the temporary folders, POSIX message queues and
System V IPC objects emptied, and the result verified: no agent process left, the repository
identical to the pristine copy, and no change to the root file system (read-only by default;
for a writable root, no change in the container's layer outside the restored paths, by
``docker diff``). A container whose reset cannot be verified is removed instead.
"""

from __future__ import annotations

import queue
import shlex
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from repogym.errors import RepogymError
from repogym.sandbox.base import SandboxConfig
from repogym.sandbox.client import engine_errors
from repogym.sandbox.docker import DockerSandbox
from repogym.sandbox.pristine import PRISTINE, fill_script

# Paths the reset restores; a change anywhere else makes the container unusable.
RESTORED = ("/testbed", "/home/repogym", "/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue", "/root",
            "/opt/repogym-grade")
RESET_CAPS = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL")


def reset_script(box: DockerSandbox) -> str:
    """Kills the agent's processes, refills its writable paths, empties the temporary folders
    and checks the repository against the pristine copy."""
    user = shlex.quote(box.user or "")
    return f"""set -u
pkill -9 -u {user} 2>/dev/null; for i in 1 2 3 4 5; do pgrep -u {user} >/dev/null || break; \
sleep 0.02; pkill -9 -u {user} 2>/dev/null; done
pgrep -u {user} >/dev/null && {{ echo PROCESSES_LEFT; exit 4; }}
{fill_script(box.fill_targets(), clear=True)}
find /tmp /var/tmp /dev/shm /dev/mqueue -mindepth 1 -delete 2>/dev/null
diff -rq --no-dereference {PRISTINE}/testbed {shlex.quote(box.workdir)} >/dev/null \
  || {{ echo TREE_DIFFERS; exit 7; }}
echo RESET_OK
"""


class SandboxPool:
    """Started containers per (image, role); ``size`` kept ready for each.

    A container being reset or being started by the filler counts as ready: ``acquire`` waits
    for it (a reset takes a fraction of a second) rather than starting another one, and the
    background filler does not start one in its place.

    Images with no container in use keep their ready containers only for the ``idle_images``
    of them used last: a pool that goes over many images (an eval of a large suite) does not
    keep a container for each, while one that moves among a few keeps them all warm.
    """

    RECYCLE_WAIT = 60.0

    def __init__(self, size: int = 0, reuse: bool = True, grader_size: int = 0,
                 idle_images: int = 2,
                 reset: dict[str, Callable[[DockerSandbox], bool]] | None = None,
                 **config: Any):
        if size < 0 or grader_size < 0 or idle_images < 0:
            raise ValueError(f"pool sizes must be >= 0 (size={size}, grader_size={grader_size}, "
                             f"idle_images={idle_images})")
        self.size, self.reuse, self.config = size, reuse, config
        self.idle_images = idle_images
        self._in_use: dict[tuple[str, str], int] = defaultdict(int)
        self._touched: dict[tuple[str, str], float] = {}
        # how a used container of each role is reset in place (False: it could not be, and
        # it is removed); a role without one is never handed out twice
        self.resetters: dict[str, Callable[[DockerSandbox], bool]] = {
            "agent": reset_in_place, **(reset or {})}
        self.sizes = {"agent": size, "grader": grader_size}
        self._ready: dict[tuple[str, str], queue.Queue[DockerSandbox]] = defaultdict(queue.Queue)
        self._resetting: dict[tuple[str, str], int] = defaultdict(int)
        self._starting: dict[tuple[str, str], int] = defaultdict(int)
        self._waiting: dict[tuple[str, str], int] = defaultdict(int)
        self._configs: dict[tuple[str, str], dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._changed = threading.Condition()
        self._closed = False
        self._workers: list[threading.Thread] = []
        self._fillers: dict[tuple[str, str], threading.Thread] = {}
        # what a role's containers are started as, DockerSandbox where a role has none: the
        # grader's (a GradingBox) start their runner and pytest's import in the filler thread
        # too; a start that fails leaves nothing behind
        self.kinds: dict[str, Callable[[SandboxConfig], DockerSandbox]] = {}
        # hits: handed out without a start (waited: of them, after waiting for a reset or a
        # start); misses: started for the caller
        self.stats = {"hits": 0, "misses": 0, "waited": 0, "reused": 0, "discarded": 0,
                      "evicted": 0, "errors": 0}
        self.errors: list[str] = []

    def _new(self, key: tuple[str, str]) -> DockerSandbox:
        image, role = key
        cfg = {**self.config, **self._configs.get(key, {})}
        if self.reuse and role == "agent":
            cfg["cap_add"] = tuple(sorted(set(cfg.get("cap_add", ())) | set(RESET_CAPS)))
        start = self.kinds.get(role, DockerSandbox)
        box = start(SandboxConfig(image=image, role=role, **cfg))
        if self.reuse and role == "agent" and not box.read_only:
            # what the engine itself changed (init binary, /etc/hosts, ...) before any agent
            try:
                with engine_errors(f"list the changes in {box.name}"):
                    box.baseline_changes = {c.get("Path", "") for c in box.container.diff() or []}
            except RepogymError:
                box.close()
                raise
        return box

    def acquire(self, image: str, role: str = "agent", returning: Any = None,
                **overrides: Any) -> DockerSandbox:
        """A ready container of ``image`` (started now when none is ready or on its way).

        ``returning`` is the caller's used container, handed back in the same call. Where
        spares are kept it goes back first: its reset then counts as a place being filled, so
        the filler starts nothing in its stead, and the spare is taken at once. Without spares
        it goes back last, so that this call starts a container instead of waiting for it.
        """
        key = (image, role)
        if overrides:
            self._configs[key] = {**self._configs.get(key, {}), **overrides}
        first = returning is not None and self.sizes.get(role, 0) > 0
        if first:
            self.release(returning)
        try:
            return self._hand_out(key)
        finally:
            if returning is not None and not first:
                self.release(returning)

    def _hand_out(self, key: tuple[str, str]) -> DockerSandbox:
        box = self._take(key)
        self.stats["hits" if box is not None else "misses"] += 1
        if box is not None and not box.alive():
            box.close()
            box = None
        if box is None:
            box = self._new(key)  # before the refill: two starts at once slow both
        self._use(key, +1)
        if key[1] != "grader":
            # a grading container is busy for a second: its replacement starts when it comes
            # back, instead of competing with it for the engine and the CPUs
            self._refill(key)
        return box

    def _take(self, key: tuple[str, str]) -> DockerSandbox | None:
        """A ready container, waiting for one being reset if there is one."""
        deadline = time.monotonic() + self.RECYCLE_WAIT
        waited = False
        with self._changed:
            while True:
                try:
                    box = self._ready[key].get_nowait()
                    self.stats["waited"] += waited
                    return box
                except queue.Empty:
                    pass
                left = deadline - time.monotonic()
                coming = self._resetting[key] + self._starting[key]
                if not coming or left <= 0 or self._closed:
                    return None
                waited = True
                self._waiting[key] += 1
                try:
                    self._changed.wait(left)
                finally:
                    self._waiting[key] -= 1

    def _put(self, key: tuple[str, str], box: DockerSandbox) -> None:
        with self._changed:
            if not self._closed:
                self._ready[key].put(box)
                self._changed.notify_all()
                return
        box.close()  # started while the pool was closing: nobody would remove it

    def release(self, box: Any) -> None:
        """Takes a used sandbox back: reset in place in the background, or removed."""
        if not isinstance(box, DockerSandbox):
            box.close()
            return
        key = (box.config.image, box.config.role)
        self._use(key, -1)
        if not self.reuse or key[1] not in self.resetters:
            # never handed out again: removed in the background, and its place refilled now
            # (a container being removed is not one being reset, so nobody waits for it)
            self._start_worker(self._discard, box)
            self._refill(key)
            return
        with self._changed:
            self._resetting[key] += 1
        self._start_worker(self._recycle, box)

    def discard(self, box: Any) -> None:
        """Takes a used sandbox back to be removed, not reset (its user is closing)."""
        if isinstance(box, DockerSandbox):
            self._use((box.config.image, box.config.role), -1)
            self._start_worker(self._discard, box)
        else:
            box.close()

    def _start_worker(self, target: Any, box: DockerSandbox) -> None:
        worker = threading.Thread(target=target, args=(box,), daemon=True)
        # started while the list is held: close() never sees a thread it cannot join yet
        with self._lock:
            self._workers = [w for w in self._workers if w.is_alive()] + [worker]
            worker.start()

    def _discard(self, box: DockerSandbox) -> None:
        self.stats["discarded"] += 1
        try:
            box.close()
        except RepogymError as exc:  # the container stays on the list removed at exit
            self._failed(exc)

    def _recycle(self, box: DockerSandbox) -> None:
        key = (box.config.image, box.config.role)
        try:
            if self._reusable(key) and self.resetters[key[1]](box) and self._keep(key, box):
                self.stats["reused"] += 1
                return
            self._discard(box)
        except RepogymError as exc:
            # the engine is gone: the container stays on the list removed at exit
            self._failed(exc)
        finally:
            with self._changed:
                self._resetting[key] -= 1
                self._changed.notify_all()
            self._refill(key)  # a discarded container leaves a place to fill

    def _reusable(self, key: tuple[str, str]) -> bool:
        return self.reuse and not self._closed and key[1] in self.resetters

    def _keep(self, key: tuple[str, str], box: DockerSandbox) -> bool:
        """Puts a reset container back unless the pool already holds enough: ``size`` ready
        (at least one) beyond the callers waiting for one. Decided once the reset is done, so
        a spare about to be taken does not cost the container coming back."""
        with self._changed:
            room = max(self.size, 1) + self._waiting[key]
            if self._closed or self._ready[key].qsize() >= room:
                return False
            self._ready[key].put(box)
            self._changed.notify_all()
        self._evict(key[1])
        return True

    def _use(self, key: tuple[str, str], change: int) -> None:
        with self._changed:
            self._in_use[key] = max(0, self._in_use[key] + change)
            self._touched[key] = time.monotonic()

    def _evict(self, role: str) -> None:
        """Removes the ready containers of idle images beyond the ``idle_images`` used last."""
        doomed: list[DockerSandbox] = []
        with self._changed:
            idle = [k for k in self._ready if k[1] == role and not self._in_use[k]
                    and not self._waiting[k]]
            idle.sort(key=lambda k: self._touched.get(k, 0.0), reverse=True)
            for key in idle[self.idle_images:]:
                while not self._ready[key].empty():
                    doomed.append(self._ready[key].get_nowait())
        for box in doomed:
            self.stats["evicted"] += 1
            self._start_worker(self._discard, box)

    def _failed(self, exc: RepogymError) -> None:
        """A background thread's failure, kept for the owner (threads have no caller)."""
        with self._lock:
            self.stats["errors"] += 1
            self.errors.append(str(exc)[:500])
            del self.errors[:-20]

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
        while (not self._closed and self._ready[key].qsize() + self._resetting[key]
               < self.sizes.get(key[1], 0)):
            with self._changed:
                self._starting[key] += 1
            try:
                box = self._new(key)
            except RepogymError as exc:
                self._failed(exc)  # acquire() starts one itself and raises what it hits
                return
            finally:
                with self._changed:
                    self._starting[key] -= 1
                    self._changed.notify_all()
            if self._closed:
                box.close()
                return
            self._put(key, box)
            self._evict(key[1])

    def ready_count(self, image: str, role: str = "agent") -> int:
        """Containers of ``image`` ready to hand out now (not those being reset or started)."""
        ready = self._ready.get((image, role))
        return 0 if ready is None else ready.qsize()

    def ready_boxes(self, image: str, role: str = "agent") -> list[DockerSandbox]:
        """The containers of ``image`` ready to hand out now (a snapshot; they stay ready)."""
        ready = self._ready.get((image, role))
        return [] if ready is None else list(ready.queue)

    def busy(self) -> bool:
        """Whether a container is being started, reset or removed in the background."""
        with self._lock:
            threads = [*self._fillers.values(), *self._workers]
        return any(t.is_alive() for t in threads)

    def counts(self) -> dict[str, int]:
        """Containers held, over every image and role: ready, being reset, being started."""
        with self._changed:
            return {"ready": sum(q.qsize() for q in self._ready.values()),
                    "resetting": sum(self._resetting.values()),
                    "starting": sum(self._starting.values())}

    @property
    def closed(self) -> bool:
        return self._closed

    def warm(self, image: str, role: str = "agent", **overrides: Any) -> None:
        """Starts filling the pool for ``image`` before the first ``acquire``."""
        if overrides:
            self._configs[(image, role)] = overrides
        self._use((image, role), 0)
        self._refill((image, role))

    def close(self) -> None:
        """Removes every container the pool holds; raises the first failure after trying all."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        # a worker may start another (a failed reset discards its container): joined until
        # none is left, each list read under the lock its writers hold
        joined: set[threading.Thread] = set()
        while True:
            with self._lock:
                threads = [t for t in [*self._fillers.values(), *self._workers]
                           if t not in joined]
            if not threads:
                break
            for thread in threads:
                thread.join(timeout=60)
                joined.add(thread)
        boxes = []
        for q in self._ready.values():
            while True:
                try:
                    boxes.append(q.get_nowait())
                except queue.Empty:
                    break
        failures: list[RepogymError] = []

        def remove(box: DockerSandbox) -> None:
            try:
                box.close()
            except RepogymError as exc:
                failures.append(exc)

        # side by side: each removal is an engine round trip of a tenth of a second or more
        removals = [threading.Thread(target=remove, args=(box,)) for box in boxes]
        for thread in removals:
            thread.start()
        for thread in removals:
            thread.join()
        if failures:
            raise failures[0]


def reset_in_place(box: DockerSandbox) -> bool:
    """Restores a used container to the image's state and verifies it (see the module doc)."""
    try:
        if box.user is None:
            return False  # a root agent's processes cannot be told from the container's own
        result = box.exec(["bash", "-c", reset_script(box)], user="root", timeout=60)
        if result.exit_code != 0 or "RESET_OK" not in result.output:
            return False
        if not box.read_only and not _layer_unchanged(box):
            return False
        box.restart_shell()
        # System V IPC objects outlive their processes and only their owner may remove them
        if box.run(IPC_CLEANUP, timeout=30).exit_code != 0:
            return False
    except RepogymError:
        return False
    return box.alive()


IPC_CLEANUP = ("command -p ipcrm -a 2>/dev/null; [ -z \"$(command -p ipcs -m -q -s 2>/dev/null "
               "| command -p grep -E '^0x')\" ]")


def _layer_unchanged(box: DockerSandbox) -> bool:
    """No change in the writable layer outside the restored paths. (Under a read-only root the
    kernel guarantees this, and ``docker diff`` is slow, so it only runs for writable roots.)"""
    if box.baseline_changes is None:
        return False  # not started by a pool: nothing to compare the layer with
    with engine_errors(f"list the changes in {box.name}"):
        changes = box.container.diff() or []
    for change in changes:
        path = change.get("Path", "")
        if path in box.baseline_changes:
            continue
        if not any(path == p or path.startswith(p + "/") or p.startswith(path + "/")
                   for p in RESTORED):
            return False
    return True
