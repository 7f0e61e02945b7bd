"""Progress while one candidate is checked: building its image (the repository's own setup,
often minutes) and running its tests say nothing until they end, so a line every so often
says what is going on and for how long."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from repogym.images.repository import image_tag
from repogym.sandbox.client import docker_client
from repogym.schema import Task

EVERY = 30.0  # seconds between two lines


def phase(task: Task) -> str:
    """What checking ``task`` is busy with: its image is built first, then its tests run."""
    try:
        docker_client().images.get(image_tag(task))
    except Exception:  # noqa: BLE001 - not there yet (or the engine cannot say): building
        return "building its image (the repository's setup runs)"
    return "running its tests with and without the patch"


@contextmanager
def heartbeat(log: Callable[[str], None], what: str, task: Task | None = None,
              every: float | None = None) -> Iterator[None]:
    """Logs ``what: still working (N s...)`` every ``every`` seconds (:data:`EVERY`) until the
    block ends."""
    stop, start = threading.Event(), time.monotonic()
    every = EVERY if every is None else every

    def beat() -> None:
        while not stop.wait(every):
            doing = f": {phase(task)}" if task is not None else ""
            log(f"  {what}: still working ({time.monotonic() - start:.0f} s{doing})")

    thread = threading.Thread(target=beat, name="repogym-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
