"""Fixtures of the reliability tests: a demo task's image, and a second engine reached over TCP
with TLS, shared by the tests of remote engines and of the Ray cluster (starting one costs
seconds; its images survive from test to test)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_support import TLSEngine
from reliability_support import have


def need_second_engine() -> None:
    missing = [b for b in ("dockerd", "docker", "ip", "openssl") if not have(b)]
    if os.geteuid() != 0 or missing:
        message = f"needs root and {', '.join(missing) or 'dockerd'} to start a second engine"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


@pytest.fixture(scope="session")
def tls_engine() -> Iterator[TLSEngine]:
    need_second_engine()
    engine = TLSEngine(Path(f"/tmp/rgc-{os.getpid()}"))
    try:
        engine.start()
        yield engine
    finally:
        engine.close()


@pytest.fixture(scope="session")
def image() -> str:
    """The image of one demo task (demo__minicalc-1), built when missing."""
    from repogym.images.repository import ensure_image
    from repogym.suite import load_suite

    task = next(t for t in load_suite("demo") if t.instance_id == "demo__minicalc-1")
    return ensure_image(task, progress=lambda _m: None).tag
