"""The grading container and its processes, against a real engine."""

from __future__ import annotations

import pytest

from repogym.envs.grading.box import GradingBox
from repogym.envs.grading.grader import Grader, GraderConfig
from repogym.errors import GradingError
from repogym.sandbox.base import SandboxConfig, SandboxLost
from repogym.sandbox.client import docker_client
from repogym.sandbox.pool import SandboxPool

pytestmark = pytest.mark.docker


def _gone(name: str) -> bool:
    return not docker_client().api.containers(all=True, filters={"name": name})


def test_a_grading_box_owns_its_runner_and_waiting_pytest(toy_image: str) -> None:
    config = SandboxConfig(image=toy_image, role="grader", shell=False, cap_add=("KILL",))
    plain = GradingBox(config)
    warm = GradingBox.warmed(config)
    try:
        assert plain.runner.run("id -u").output == "0\n"
        assert plain.pytest is None and plain.decoy_pytest is None
        assert warm.pytest is not None and warm.decoy_pytest is not None
        assert warm.pytest.ready and warm.decoy_pytest.ready
        assert warm.pytest.pid != warm.decoy_pytest.pid
    finally:
        plain.close()
        warm.close()
    with pytest.raises(SandboxLost, match="closed"):
        _ = warm.runner  # closed with the container
    assert _gone(plain.name) and _gone(warm.name)
    warm.close()  # twice is fine


def test_a_pool_given_to_a_grader_starts_warm_grading_boxes(toy_image: str) -> None:
    pool = SandboxPool(grader_size=1)
    try:
        grader = Grader(GraderConfig(), pool=pool)
        box = pool.acquire(toy_image, role="grader", **grader.container_config())
        assert isinstance(box, GradingBox) and box.pytest is not None
        pool.release(box)
        # a pool that no grader set up hands out plain sandboxes: grading says so
        other = Grader(GraderConfig(), pool=SandboxPool())
        assert other.pool is not None
        other.pool.kinds.clear()
        with pytest.raises(GradingError, match="one Grader"):
            other._acquire(toy_image)
        other.pool.close()
    finally:
        pool.close()
