"""When each image was last used, and which to evict to fit a disk budget.

Every ``ensure_image`` (an episode, a grade, a validation) records the task image's use, and
every environment image built on records its own: a file per image under
``~/.cache/repogym/image-use`` whose modification time is the last use, so processes record
at once without a lock.

:func:`plan` chooses what ``repogym images prune --budget SIZE`` removes: task images, least
recently used first (one that was never recorded counts from its creation), until the images
in scope fit; then, if they still do not, environment images that no task image left is built
on, the same way. Base, root and toolchain images are never removed: every image shares them.
Sizes are counted by layer, a shared layer once, as :func:`repogym.images.usage.disk_use`
does. An image removed is rebuilt by the next ``ensure_image`` that needs it.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

TASK_KINDS = ("repo", "layer", "untagged")
ENV_KINDS = ("env",)
Layer = tuple[str, str, int]  # what made it, when, its size: the same in every image sharing it


def use_dir() -> Path:
    return Path.home() / ".cache" / "repogym" / "image-use"


def _path(tag: str) -> Path:
    return use_dir() / hashlib.sha256(tag.encode()).hexdigest()[:24]


def record_use(tag: str) -> None:
    """Marks ``tag`` as used now (best effort: a read-only home only loses the record)."""
    path = _path(tag)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(tag + "\n", encoding="utf-8")
    except OSError:
        pass


def last_use(tag: str) -> float | None:
    """When ``tag`` was last used (seconds since the epoch), or None if never recorded."""
    try:
        return _path(tag).stat().st_mtime
    except OSError:
        return None


@dataclass(frozen=True)
class Candidate:
    """An image as the plan sees it."""

    name: str  # its tag (or id when untagged)
    kind: str  # repo, layer, untagged, env, base, rootfs, toolchain...
    layers: frozenset[Layer]
    top: Layer | None  # its own last layer: an image whose layers hold it is built on it
    used: float  # last use, or creation
    containers: int = 0  # containers made from it: such an image stays


def plan(images: Iterable[Candidate], budget: int) -> tuple[list[Candidate], int, int]:
    """(what to remove, bytes before, bytes after): task images least recently used first,
    then environment images no remaining task image is built on, until the total fits."""
    remaining = {c.name: c for c in images}
    counts: Counter[Layer] = Counter(layer for c in remaining.values() for layer in c.layers)
    total = before = sum(layer[2] for layer in counts)
    evicted: list[Candidate] = []

    def evict(candidate: Candidate) -> None:
        nonlocal total
        del remaining[candidate.name]
        evicted.append(candidate)
        for layer in candidate.layers:
            counts[layer] -= 1
            if counts[layer] == 0:
                total -= layer[2]

    for kinds in (TASK_KINDS, ENV_KINDS):
        for candidate in sorted((c for c in remaining.values() if c.kind in kinds),
                                key=lambda c: c.used):
            if total <= budget:
                return evicted, before, total
            if candidate.containers or (candidate.kind in ENV_KINDS and any(
                    candidate.top in c.layers for c in remaining.values()
                    if c.kind in TASK_KINDS)):
                continue
            evict(candidate)
    return evicted, before, total


_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9,
          "gb": 10**9, "t": 10**12, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30,
          "tib": 2**40}


def parse_size(text: str) -> int:
    """``12GB``, ``500 MB``, ``1.5GiB`` or a number of bytes."""
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", text)
    unit = match.group(2).lower() if match else ""
    if not match or unit not in _UNITS:
        raise ValueError(f"size {text!r}: write a number with a unit, e.g. 12GB, 500MB, 1.5GiB")
    return int(float(match.group(1)) * _UNITS[unit])


def created(text: str) -> float:
    """An image's creation time as the engine writes it (for images never recorded)."""
    try:
        return datetime.fromisoformat(text[:19]).replace(tzinfo=UTC).timestamp()
    except ValueError:
        return 0.0


def touch(tag: str, when: float) -> None:
    """Sets ``tag``'s last use to ``when`` (tests, and a tool that imports usage)."""
    record_use(tag)
    os.utime(_path(tag), (when, when))
