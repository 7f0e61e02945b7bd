"""`repogym doctor`: a short summary of repogym's images with their real disk use, and a
removal of unused task images that takes nothing a kept suite needs. The removal is tried
on an image this test makes: other users of the engine keep theirs."""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Iterator
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from repogym.images import usage as image_usage
from repogym.images.python_base import ensure_base
from repogym.images.recipe import LABEL_SPEC
from repogym.images.repository import image_tag
from repogym.images.usage import Image
from repogym.sandbox.client import docker_client
from repogym.scripts.cli import main
from repogym.suite import load_suite

pytestmark = pytest.mark.docker


@pytest.fixture()
def spare_image() -> Iterator[str]:
    """A task image no suite uses: the base with one label more (it shares every layer)."""
    client = docker_client()
    base = ensure_base("3.11", progress=lambda _m: None).tag
    tag = f"repogym/repo:doctor-test-{uuid.uuid4().hex[:12]}"
    client.images.build(fileobj=io.BytesIO(f'FROM {base}\nLABEL {LABEL_SPEC}="test"\n'.encode()),
                        tag=tag, rm=True)
    yield tag
    try:
        client.images.remove(tag)
    except Exception:  # noqa: BLE001 - the test removed it already
        pass


def doctor(*argv: str) -> tuple[int, str, dict[str, object]]:
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(["doctor", *argv, "--json", "-"])
    text = out.getvalue()
    start = text.index("\n{")
    return code, text[:start], json.loads(text[start:])


def test_summary_counts_images_and_real_disk_use(spare_image: str) -> None:
    code, printed, report = doctor()
    assert code == 0
    assert len(printed.strip().splitlines()) <= 6, printed  # a summary, whatever the count
    assert "repogym images: " in printed and "on disk with shared layers counted once" in printed
    images = report["images"]
    assert isinstance(images, list) and spare_image in [t for i in images for t in i["tags"]]
    assert 0 < int(report["disk_use"]) <= int(report["nominal_size"])  # type: ignore[call-overload]
    code, printed, _ = doctor("--images")
    assert spare_image in printed


def test_prune_spares_the_kept_suites_and_images_in_use(spare_image: str, tmp_path: Path
                                                        ) -> None:
    client = docker_client()
    images = image_usage.repogym_images(client)
    needed = image_usage.needed_tags(image_usage.keep_suites([]))
    assert {image_tag(t) for t in load_suite("demo")} <= needed
    spare = image_usage.unused(images, needed)
    ours = [i for i in spare if spare_image in i.tags]
    assert len(ours) == 1 and not set(i.name for i in spare) & needed
    used = Image("sha256:x", (spare_image,), "repo", 1, 1, containers=1)
    assert image_usage.unused([used], set()) == []  # a container was made from it
    assert image_usage.unused([Image("sha256:y", ("repogym/base:x",), "base", 1, 1, 0)],
                              set()) == []  # bases are never task images
    code, printed, report = doctor("--prune-images", "--dry-run")
    assert spare_image in printed and report["images_removed"] == []
    assert client.images.get(spare_image)  # a dry run removes nothing
    removed, failed = image_usage.remove(client, ours)
    assert removed == [spare_image] and failed == []
    assert spare_image not in [t for i in image_usage.repogym_images(client) for t in i.tags]
