"""What repogym's images cost on disk, and which task images no suite needs any more.

Docker reports each image's size as if it were alone; task images share their base's layers,
so the sum of those sizes says little. :func:`disk_use` counts every layer once. A layer is
known by what made it (the build step, its time and its size, from the image's history), the
same for every image that shares it.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repogym.images import derived
from repogym.images import lru as image_lru
from repogym.images.dataset import layered_tag
from repogym.images.env_image import env_tag, is_shared
from repogym.images.lru import Candidate, Layer
from repogym.images.recipe import LABEL_COMMIT, LABEL_SPEC
from repogym.images.repository import built_tag, image_tag
from repogym.sandbox.client import docker_client
from repogym.sandbox.features import engine_features
from repogym.suite import BUILTIN, load_suite

TASK_KINDS = ("repo", "layer")  # images made for tasks; base and rootfs are shared by all
KINDS = ("base", "rootfs", "toolchain", "env", *TASK_KINDS, "untagged")


@dataclass(frozen=True)
class Image:
    """One image that repogym made, as the engine's disk-usage report describes it."""

    id: str
    tags: tuple[str, ...]
    kind: str  # base, rootfs, repo, layer, or untagged (a task image that lost its tag)
    size: int  # bytes, its layers counted as if it were alone
    own: int  # bytes in layers no other image shares
    containers: int  # containers (running or not) made from it

    @property
    def name(self) -> str:
        return self.tags[0] if self.tags else self.id[7:19]


def repogym_images(client: Any) -> list[Image]:
    """Every image tagged ``repogym/...``, and untagged ones that carry a task image's labels
    (left behind when a task image was rebuilt)."""
    found = []
    for row in _image_rows(client):
        # Podman names an image that came from no registry localhost/NAME
        names = [t.removeprefix("localhost/") for t in row.get("RepoTags") or []]
        tags = tuple(t for t in names if t.startswith("repogym/"))
        labels = row.get("Labels") or {}
        if tags:
            kind = tags[0].split(":", 1)[0].removeprefix("repogym/")
        elif not [t for t in row.get("RepoTags") or [] if t != "<none>:<none>"] and (
                LABEL_SPEC in labels or LABEL_COMMIT in labels):
            kind = "untagged"
        else:
            continue
        size = int(row.get("Size") or 0)
        shared = int(row.get("SharedSize") or 0)
        found.append(Image(row["Id"], tags, kind, size, max(0, size - max(shared, 0)),
                           int(row.get("Containers") or 0)))
    return sorted(found, key=lambda i: (KINDS.index(i.kind) if i.kind in KINDS else 9, i.name))


def _image_rows(client: Any) -> list[dict[str, Any]]:
    """The engine's rows of images. Docker's disk-usage report counts shared sizes and
    containers; Podman's names each image by its tag alone and drops its labels, while
    Podman's image list has both and counts them too."""
    if engine_features(client).kind == "podman":
        return list(client.api.images())
    return list(client.df().get("Images") or [])


def disk_use(client: Any, images: Iterable[Image]) -> int:
    """Bytes on disk of ``images`` together, every shared layer counted once."""
    def layers(image: Image) -> set[tuple[str, str, int]]:
        history = client.api.history(image.id)
        return {(str(h.get("CreatedBy")), str(h.get("Created")), int(h.get("Size") or 0))
                for h in history if int(h.get("Size") or 0) > 0}

    with ThreadPoolExecutor(max_workers=8) as pool:
        every = set().union(*pool.map(layers, list(images)))
    return sum(size for _, _, size in every)


def needed_tags(suites: Iterable[str | Path]) -> set[str]:
    """The task images the tasks of ``suites`` use (built or not). The CA bundle is no part
    of a tag, so one tag per task covers builds with and without ``REPOGYM_CA_BUNDLE``."""
    tags = set()
    for suite in suites:
        for task in load_suite(suite):
            tags.add(image_tag(task))
            if derived.derivable(task):  # a thin image: the snapshot's image under it too
                tags.add(built_tag(derived.snapshot_task(task)))
            if task.environment.image:  # a dataset's image: the layer made on it
                tags.update(_layered(task))
    return tags


def _layered(task: Any) -> set[str]:
    try:
        base = docker_client().images.get(task.environment.image)
    except Exception:  # noqa: BLE001 - not pulled: no layered image can exist either
        return set()
    return {layered_tag(base.id, task)}


def suite_tags(suites: Iterable[str | Path]) -> tuple[set[str], set[str]]:
    """The task images and the environment images the tasks of ``suites`` use (built or
    not)."""
    tasks_, envs = needed_tags(suites), set()
    for suite in suites:
        envs |= {env_tag(t) for t in load_suite(suite) if is_shared(t.environment)}
    return tasks_, envs


def layers_of(client: Any, image: Image) -> tuple[frozenset[Layer], Layer | None]:
    """An image's layers (as ``disk_use`` knows them) and its own last one."""
    history = client.api.history(image.id)
    layers = [(str(h.get("CreatedBy")), str(h.get("Created")), int(h.get("Size") or 0))
              for h in history]
    sized = frozenset(layer for layer in layers if layer[2] > 0)
    return sized, next((layer for layer in layers if layer[2] > 0), None)


def candidates(client: Any, images: list[Image]) -> list[Candidate]:
    """``images`` as :func:`repogym.images.lru.plan` sees them: layers, last use."""
    def one(image: Image) -> Candidate:
        layers, top = layers_of(client, image)
        used = max((t for tag in image.tags if (t := image_lru.last_use(tag)) is not None),
                   default=None)
        if used is None:
            used = image_lru.created(str(client.images.get(image.id).attrs.get("Created")))
        return Candidate(image.name, image.kind, layers, top, used, image.containers)

    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(one, images))


def prune_to(client: Any, budget: int, suites: list[str] | None = None, dry_run: bool = False
             ) -> dict[str, Any]:
    """Removes least recently used task images (then environment images nothing is built on)
    until repogym's images, or those of ``suites``, fit in ``budget`` bytes."""
    images = repogym_images(client)
    if suites:
        tasks_, envs = suite_tags(suites)
        images = [i for i in images if set(i.tags) & (tasks_ | envs)]
    found = candidates(client, images)
    evict, before, after = image_lru.plan(found, budget)
    by_name = {i.name: i for i in images}
    removed, failed = ([], []) if dry_run else remove(client, [by_name[c.name] for c in evict])
    return {"budget": budget, "before": before, "after": after, "images": len(images),
            "evict": [c.name for c in evict], "removed": removed, "failed": failed,
            "dry_run": dry_run, "fits": after <= budget}


def unused(images: list[Image], needed: set[str]) -> list[Image]:
    """Task images that no suite in ``needed`` uses and no container was made from."""
    return [i for i in images if (i.kind in TASK_KINDS or i.kind == "untagged")
            and not set(i.tags) & needed and i.containers == 0]


def keep_suites(extra: Iterable[str]) -> list[str]:
    """The built-in suites and ``extra``: what a clean-up must never take from."""
    return list(dict.fromkeys([*sorted(BUILTIN), *extra]))


def remove(client: Any, images: list[Image]) -> tuple[list[str], list[str]]:
    """Removes each image (never forced: one in use stays); returns (removed, failures)."""
    removed, failed = [], []
    for image in images:
        try:
            for tag in image.tags or (image.id,):
                client.images.remove(tag, noprune=False)
            removed.append(image.name)
        except Exception as exc:  # noqa: BLE001 - reported per image, the others go on
            failed.append(f"{image.name}: {exc}")
    return removed, failed
