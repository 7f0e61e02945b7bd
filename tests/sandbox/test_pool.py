"""Warm pool and verified in-place reset against a real engine."""

from __future__ import annotations

import time

import pytest

from repogym.sandbox.client import docker_client
from repogym.sandbox.pool import SandboxPool, reset_in_place

pytestmark = pytest.mark.docker


def wait_for(predicate, seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def test_used_container_is_reset_verified_and_reused(toy_image: str) -> None:
    pool = SandboxPool(size=0, reuse=True)
    try:
        box = pool.acquire(toy_image)
        box.run("echo broken > calc/__init__.py; echo x > new.py; mkdir -p /tmp/d; "
                "echo secret > ~/.note; git commit -qam hack; (sleep 1000 &)")
        first = box.container.id
        pool.release(box)
        assert wait_for(lambda: pool.stats["reused"] == 1)
        again = pool.acquire(toy_image)
        assert again.container.id == first and pool.stats["hits"] == 1
        state = again.run("git status --porcelain; git log --oneline | wc -l; ls /tmp; "
                          "ls -A ~ | grep -c note; pgrep -c -u repogym sleep").output.split()
        assert state == ["1", "0", "0"], state
        assert "return a - b" in again.run("cat calc/__init__.py").output
        pool.release(again)
    finally:
        pool.close()


def test_change_outside_restored_paths_discards_the_container(toy_image: str) -> None:
    pool = SandboxPool(size=0, reuse=True, read_only=False)  # a writable root to tamper with
    try:
        box = pool.acquire(toy_image)
        writable = box.run("for d in /run/lock /var/lock /var/mail; do [ -w $d ] && echo $d; "
                           "done | head -1").output.strip()
        if not writable:
            pytest.skip("the image has no other world-writable folder")
        box.run(f"echo planted > {writable}/x")
        assert not reset_in_place(box)
        box.close()
    finally:
        pool.close()


def test_prestarted_containers_are_handed_out(toy_image: str) -> None:
    pool = SandboxPool(size=2)
    try:
        pool.warm(toy_image)
        assert wait_for(lambda: pool._ready[(toy_image, "agent")].qsize() == 2)
        start = time.monotonic()
        box = pool.acquire(toy_image)
        assert time.monotonic() - start < 0.5 and pool.stats["hits"] == 1
        assert box.run("echo ready").output == "ready\n"
        pool.release(box)
    finally:
        pool.close()
    left = docker_client().api.containers(all=True, filters={"name": box.name})
    assert not left


def test_a_released_grader_is_removed_and_its_place_refilled(toy_image: str) -> None:
    pool = SandboxPool(grader_size=1)
    key = (toy_image, "grader")
    try:
        pool.warm(toy_image, role="grader", shell=False)
        assert wait_for(lambda: pool._ready[key].qsize() == 1)
        for _ in range(3):  # each release starts the next one, with no warm() in between
            box = pool.acquire(toy_image, role="grader", shell=False)
            time.sleep(0.5)  # grading: its replacement waits, off the engine and the CPUs
            filler = pool._fillers.get(key)
            assert pool._ready[key].qsize() == 0 and not (filler and filler.is_alive())
            pool.release(box)
            assert pool._resetting[key] == 0  # nobody waits on a container being removed
            assert wait_for(lambda: pool._ready[key].qsize() == 1)
            assert wait_for(lambda b=box: not docker_client().api.containers(
                all=True, filters={"name": b.name}))
        assert pool.stats["discarded"] == 3 and pool.stats["hits"] == 3
    finally:
        pool.close()


def test_idle_images_beyond_the_last_used_lose_their_ready_containers(toy_image: str) -> None:
    client = docker_client()
    repo, tag = toy_image.split(":")
    images = [toy_image]
    for suffix in ("evict-b", "evict-c"):  # the same image under other names: other pool keys
        client.images.get(toy_image).tag(repo, f"{tag}-{suffix}")
        images.append(f"{repo}:{tag}-{suffix}")
    pool = SandboxPool(size=1, idle_images=1)
    try:
        box = None
        for image in images:  # one env moving from image to image, as an eval of a suite does
            box = pool.acquire(image, returning=box)
            assert wait_for(lambda i=image: pool.ready_count(i) == 1 and not any(
                pool.counts()[k] for k in ("resetting", "starting")))
        # in use: the last image (its spare); idle: the one used last before it; no more
        assert [pool.ready_count(i) for i in images] == [0, 1, 1], pool.stats
        assert pool.stats["evicted"] >= 1
        pool.release(box)
    finally:
        pool.close()
        for image in images[1:]:
            client.images.remove(image)


def test_close_during_a_release_joins_its_worker_and_leaves_no_container(
        toy_image: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from repogym.sandbox import pool as pool_module

    class SlowStart(threading.Thread):
        """Widens the gap between a worker's creation and its start."""

        def start(self) -> None:
            time.sleep(0.5)
            super().start()

    pool = SandboxPool(size=0, reuse=False)
    box = pool.acquire(toy_image)
    releasing = threading.Thread(target=pool.release, args=(box,))
    monkeypatch.setattr(pool_module.threading, "Thread", SlowStart)
    releasing.start()
    time.sleep(0.2)  # the worker that removes the container is made, not yet started
    pool.close()  # joined, not "cannot join thread before it is started"
    releasing.join()
    assert wait_for(lambda: not docker_client().api.containers(
        all=True, filters={"name": box.name}))
