"""The Docker client repogym hands to SWE-bench's ``run_instance``."""

from __future__ import annotations

import pytest

from repogym.envs.grading.official import official_client

pytestmark = pytest.mark.docker


def test_run_instances_containers_get_the_network_cpus_and_init_asked_for(toy_image: str) -> None:
    """``run_instance`` starts ``tail -f /dev/null``, which as the first process ignores
    ``docker stop``'s SIGTERM: without an init each run waited 15 s after its report."""
    client = official_client("none", cpus=1.5)
    container = client.containers.create(toy_image, "tail -f /dev/null", detach=True)
    try:
        container.start()
        container.reload()
        assert container.attrs["HostConfig"]["Init"] is True
        assert container.attrs["HostConfig"]["NetworkMode"] == "none"
        assert container.attrs["HostConfig"]["NanoCpus"] == 1_500_000_000  # the grader's quota
        container.stop(timeout=60)  # ends at once when the signal reaches tail
        container.reload()
        assert container.attrs["State"]["ExitCode"] == 143, container.attrs["State"]
    finally:
        container.remove(force=True)
