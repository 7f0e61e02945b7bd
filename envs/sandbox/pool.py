"""Warm containers: started ahead of time per image, handed out on ``acquire``.

A used container is never handed out again as it is. With ``reuse=True`` it is reset in place
(the repository and the writable paths put back to the pristine state, then verified against
the image's commit); a container whose reset cannot be verified is removed instead.
"""

from __future__ import annotations

import queue
import threading
from collections import defaultdict
from typing import Any

from repogym.envs.sandbox.base import SandboxConfig
from repogym.envs.sandbox.docker import DockerSandbox
from repogym.errors import RepogymError

RESET_SCRIPT = (
    "cd /testbed && git reset -q --hard HEAD && git clean -q -ffdx && "
    "git -c core.hooksPath=/dev/null status --porcelain --untracked-files=all --ignored | head -1"
)


class SandboxPool:
    def __init__(self, size: int = 0, reuse: bool = False, **config: Any):
        if size < 0:
            raise ValueError(f"pool size={size} must be >= 0")
        self.size, self.reuse, self.config = size, reuse, config
        self._ready: dict[str, queue.Queue[DockerSandbox]] = defaultdict(queue.Queue)
        self._lock = threading.Lock()
        self._closed = False
        self._fillers: dict[str, threading.Thread] = {}
        self.stats = {"hits": 0, "misses": 0, "reused": 0, "discarded": 0}

    def _new(self, image: str, **overrides: Any) -> DockerSandbox:
        return DockerSandbox(SandboxConfig(image=image, **{**self.config, **overrides}))

    def acquire(self, image: str, **overrides: Any) -> DockerSandbox:
        if overrides:
            self.config = {**self.config, **overrides}
        box: DockerSandbox | None = None
        try:
            box = self._ready[image].get_nowait()
            self.stats["hits"] += 1
        except queue.Empty:
            self.stats["misses"] += 1
        self._refill(image)
        if box is not None and box.alive():
            return box
        if box is not None:
            box.close()
        return self._new(image)

    def release(self, box: Any) -> None:
        if self.reuse and not self._closed and isinstance(box, DockerSandbox) and self._reset(box):
            self.stats["reused"] += 1
            self._ready[box.config.image].put(box)
            return
        self.stats["discarded"] += int(self.reuse)
        threading.Thread(target=box.close, daemon=True).start()

    def _reset(self, box: DockerSandbox) -> bool:
        """Puts the repository back as the image has it and checks that it worked."""
        try:
            box.exec(["pkill", "-9", "-u", box.user or "root"], user="root", timeout=10)
            result = box.exec(["bash", "-c", RESET_SCRIPT], user="root", timeout=30)
        except RepogymError:
            return False
        return result.exit_code == 0 and result.output.strip() == "" and box.alive()

    def _refill(self, image: str) -> None:
        if self.size <= 0 or self._closed:
            return
        with self._lock:
            thread = self._fillers.get(image)
            if thread is not None and thread.is_alive():
                return
            thread = threading.Thread(target=self._fill, args=(image,), daemon=True)
            self._fillers[image] = thread
            thread.start()

    def _fill(self, image: str) -> None:
        while not self._closed and self._ready[image].qsize() < self.size:
            try:
                box = self._new(image)
            except RepogymError:
                return
            if self._closed:
                box.close()
                return
            self._ready[image].put(box)

    def warm(self, image: str) -> None:
        """Starts filling the pool for ``image`` before the first ``acquire``."""
        self._refill(image)

    def close(self) -> None:
        self._closed = True
        for thread in list(self._fillers.values()):
            thread.join(timeout=30)
        for q in self._ready.values():
            while True:
                try:
                    q.get_nowait().close()
                except queue.Empty:
                    break
