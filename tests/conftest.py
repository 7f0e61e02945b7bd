"""Shared fixtures: Docker and Podman gating, a small real task, and a leak check over the
whole session."""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import pytest
from toy_repo import TOY_PATCH, TOY_TEST_PATCH, write_toy_repo

from repogym.errors import DockerUnavailable, RepogymError
from repogym.repo import snapshot_commit
from repogym.sandbox import client as engine_client
from repogym.sandbox import owners
from repogym.sandbox.base import LABEL_MANAGED, LABEL_PID
from repogym.sandbox.bwrap import check_bwrap
from repogym.sandbox.client import docker_available, docker_client
from repogym.sandbox.engines import make_client
from repogym.sandbox.podman import podman_engine
from repogym.schema import Task

IN_CI = bool(os.environ.get("CI"))


@functools.lru_cache(maxsize=1)
def podman_available() -> bool:
    """Whether rootless Podman's API answers (``make podman`` starts it); asked once per
    session, with time to answer on a loaded machine (as Docker's client is made once)."""
    try:
        make_client(podman_engine(), timeout=60)
    except DockerUnavailable:
        return False
    return True


@functools.lru_cache(maxsize=1)
def bwrap_available() -> bool:
    """Whether the daemonless sandbox can run here (bubblewrap, user namespaces, the user)."""
    try:
        check_bwrap()
    except RepogymError:
        return False
    return True


@contextlib.contextmanager
def engine_in_use(name: str) -> Iterator[None]:
    """This process starts its containers on ``name``'s engine (``docker``: the default one,
    ``podman``: rootless Podman's socket) until the block ends."""
    if name != "podman":
        yield
        return
    previous = engine_client.current_engine()
    engine_client.use_engine(podman_engine())
    try:
        yield
    finally:
        engine_client.use_engine(previous)


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("docker") and not docker_available():
        message = "needs a Docker engine (run `make docker`)"
        if IN_CI:
            pytest.fail(f"CI must run the Docker tests: {message}", pytrace=False)
        pytest.skip(message)
    if item.get_closest_marker("bwrap") and not bwrap_available():
        message = "needs bubblewrap and unprivileged user namespaces (run `make podman`)"
        if IN_CI:
            pytest.fail(f"CI must run the bwrap tests: {message}", pytrace=False)
        pytest.skip(message)
    if item.get_closest_marker("podman") and not podman_available():
        message = "needs rootless Podman's API (run `make podman`)"
        if IN_CI:
            pytest.fail(f"CI must run the Podman tests: {message}", pytrace=False)
        pytest.skip(message)
    if item.get_closest_marker("gpu"):
        try:
            import torch

            has_gpu = torch.cuda.is_available()
        except ImportError:
            has_gpu = False
        if not has_gpu:
            pytest.skip("needs a CUDA device")


# `make test` runs the suite in several processes (pytest-xdist, --dist loadgroup). A file's
# tests stay in one process, so its module fixtures (images, tasks) are made once; the files
# that start engines or Ray clusters of their own share one process, so two never overlap.
ONE_PROCESS = {"test_cluster.py", "test_remote_engines.py", "test_daemon_restart.py",
               "test_eval.py", "test_curriculum_ray.py", "test_ray_checking.py"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        name = item.path.name
        # the Podman tests share one process: a fork bomb's processes count against the
        # engine's one unprivileged user in every container (see sandbox/features.py)
        group = ("engines" if name in ONE_PROCESS else
                 "podman" if item.get_closest_marker("podman") else str(item.path))
        item.add_marker(pytest.mark.xdist_group(group))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """No container this test process made may outlive it."""
    owners.close_all()
    clients = [docker_client()] if docker_available() else []
    if podman_available():
        clients.append(make_client(podman_engine()))
    import time

    for engine in clients:
        deadline = time.monotonic() + 20  # grading containers are removed in the background
        while True:
            # one listing call: containers removed meanwhile must not break it
            rows = engine.api.containers(
                all=True, filters={"label": [f"{LABEL_MANAGED}=1", f"{LABEL_PID}={os.getpid()}"]}
            )
            mine = [(row.get("Names") or ["?"])[0].lstrip("/") for row in rows]
            if not mine or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        if mine:
            print(f"\nLEAK: {len(mine)} containers outlived the tests: {mine[:10]}")
            session.exitstatus = 1


@pytest.fixture(scope="session")
def toy_task(tmp_path_factory: pytest.TempPathFactory) -> Task:
    """A real small task: a bug in calc.add, hidden tests in a new file."""
    repo = write_toy_repo(tmp_path_factory.mktemp("toy") / "calc")
    return Task(
        instance_id="toy__calc-1",
        repo="toy/calc",
        base_commit=snapshot_commit(repo),
        problem_statement="calc.add(2, 3) returns -1 instead of 5.",
        patch=TOY_PATCH,
        test_patch=TOY_TEST_PATCH,
        FAIL_TO_PASS=("tests/test_add.py::test_add", "tests/test_add.py::test_add_negative"),
        PASS_TO_PASS=("tests/test_mul.py::test_mul", "tests/test_mul.py::test_mul_zero"),
        source=str(repo),
    )


@pytest.fixture(scope="session")
def toy_image(toy_task: Task) -> str:
    if not docker_available():
        pytest.fail("Docker is required") if IN_CI else pytest.skip("needs Docker")
    from repogym.images.repository import ensure_image

    return ensure_image(toy_task, progress=lambda _m: None).tag


@pytest.fixture(scope="module",
                params=["docker", pytest.param("podman", marks=pytest.mark.podman)])
def engine(request: pytest.FixtureRequest, toy_task: Task) -> Iterator[str]:
    """Each test that takes it runs on Docker, then on rootless Podman (the toy task's image
    copied there from Docker, as the podman backend does)."""
    if docker_available():
        request.getfixturevalue("toy_image")  # built once, on Docker: Podman gets a copy
    with engine_in_use(str(request.param)):
        from repogym.images.repository import ensure_image

        ensure_image(toy_task, progress=lambda _m: None)
        yield str(request.param)


@pytest.fixture()
def on_engine() -> Iterator[Callable[[str], None]]:
    """``on_engine(name)``: the rest of the test starts its containers on that engine
    (``docker`` or ``podman``); the process's engine is put back after the test."""
    stack = contextlib.ExitStack()

    def use(name: str) -> None:
        stack.enter_context(engine_in_use(name))

    with stack:
        yield use


@pytest.fixture(scope="session")
def toolchain(request: pytest.FixtureRequest) -> Iterator[Callable[[str], str]]:
    """``toolchain(language)``: that language's toolchain image, built at most once per session.
    Builds go one at a time, in the order the session's tests need them (their
    ``toolchain(language)`` marks): the next language's image builds while the previous one's
    tests run."""
    if not docker_available():
        pytest.fail("Docker is required") if IN_CI else pytest.skip("needs Docker")
    from repogym.images.toolchains import TOOLCHAINS, ensure_toolchain

    builder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="toolchain")
    builds: dict[str, Future[str]] = {}

    def submit(language: str) -> Future[str]:
        name = TOOLCHAINS[language].name  # javascript and typescript share node
        if name not in builds:
            builds[name] = builder.submit(
                lambda: ensure_toolchain(language, progress=lambda _m: None).tag)
        return builds[name]

    wanted = [m.args[0] for item in request.session.items
              for m in item.iter_markers("toolchain")]
    for language in dict.fromkeys(wanted):
        submit(language)
    try:
        yield lambda language: submit(language).result()
    finally:
        builder.shutdown(wait=True, cancel_futures=True)
