"""Forking an episode: a snapshot and a branch next to the plain ways to get the same state.

After the same prefix of steps: ``snapshot()`` and ``reset(options={"snapshot": ...})``,
against a verified in-place reset (what a snapshot should cost about as much as), replaying the
prefix from a warm reset, and ``docker commit`` of the container plus a start from the
committed image. ``docker commit`` cannot see tmpfs mounts, where repogym keeps the repository,
so it is measured on a container with a writable root; it carries no shell state either.
"""

from __future__ import annotations

import functools
from typing import Any

from repogym.bench.core import (
    Context,
    Row,
    close_env,
    compare,
    docker_box,
    make_env,
    ms,
    ready_count,
    row,
    swe,
    timed,
    wait_for,
)
from repogym.sandbox.base import SandboxConfig
from repogym.sandbox.client import docker_client
from repogym.sandbox.docker import DockerSandbox
from repogym.sandbox.pool import reset_in_place

COMMITS = 5  # docker commit samples (each takes a second or more)


def prefix(k: int) -> list[dict[str, Any]]:
    """``k`` steps that leave files, a folder and a variable behind, on any repository."""
    steps: list[dict[str, Any]] = [
        {"tool": "bash", "command": "mkdir -p bench && cd bench && export BENCH_STEP=0"}]
    for i in range(1, k):
        if i % 3 == 1:
            steps.append({"tool": "create", "path": f"/testbed/bench/f{i}.py",
                          "file_text": f"VALUE = {i}\n" * 20})
        elif i % 3 == 2:
            steps.append({"tool": "bash", "command": f"echo '# bench {i}' >> "
                                                     "\"$(git ls-files | head -1)\""})
        else:
            steps.append({"tool": "bash", "command": f"export BENCH_STEP={i}; ls -la > /tmp/l{i}"})
    return steps[:k]


def _play(env: Any, steps: list[dict[str, Any]]) -> None:
    for action in steps:
        info = env.step(action)[4]
        if info.get("action_error"):
            raise RuntimeError(f"bench prefix step {action} failed: {info['action_error']}")


def _replay(env: Any, steps: list[dict[str, Any]]) -> None:
    env.reset(seed=0)
    _play(env, steps)


def _snapshots(ctx: Context, steps: list[dict[str, Any]], n: int
               ) -> tuple[list[float], list[float], list[float], str]:
    """Snapshot, branch and replay times from one episode after ``steps``."""
    env = make_env(ctx, pool_size=1, warm_grader=False, max_steps=10**6)
    other = make_env(ctx, pool_size=1, warm_grader=False, max_steps=10**6)
    taken, branched, replayed, size = [], [], [], 0
    try:
        env.reset(seed=0)
        _play(env, steps)
        other.reset(seed=0)
        for _ in range(n):
            seconds, snap = timed(swe(env).snapshot)
            taken.append(seconds)
            size = snap.files_size
            wait_for(lambda: ready_count(other) >= 1, what="a ready container")
            branched.append(timed(functools.partial(other.reset, options={"snapshot": snap}))[0])
            snap.delete()
            wait_for(lambda: ready_count(other) >= 1, what="a ready container")
            replayed.append(timed(lambda: _replay(other, steps))[0])
    finally:
        close_env(ctx, env)
        close_env(ctx, other)
    return taken, branched, replayed, f"{len(steps)} steps before it; {size} bytes of tar"


def _in_place_resets(ctx: Context, steps: list[dict[str, Any]], n: int) -> list[float]:
    """``reset_in_place`` of a container that went through the same steps."""
    env = make_env(ctx, pool_size=0, warm_grader=False, max_steps=10**6)
    times = []
    try:
        env.reset(seed=0)
        box = docker_box(env)
        for _ in range(n):
            _play(env, steps)  # the same container, with a new shell after each reset
            seconds, ok = timed(lambda: reset_in_place(box))
            if not ok:
                raise RuntimeError("the in-place reset of the bench container failed")
            times.append(seconds)
    finally:
        close_env(ctx, env)
    return times


def _commits(ctx: Context, steps: list[dict[str, Any]], n: int) -> list[float]:
    """``docker commit`` of a writable-root container after the steps, then a start (with its
    shell) from the committed image."""
    config = SandboxConfig(image=ctx.image, run_id=ctx.run_id, role="bench", read_only=False)
    box = DockerSandbox(config)
    times = []
    try:
        for action in steps:  # the bash steps alone: the file tools are the env's
            if action["tool"] == "bash":
                box.run(action["command"])
        for _ in range(n):
            def commit_and_start() -> tuple[str, DockerSandbox]:
                image = box.container.commit()
                return image.id, DockerSandbox(SandboxConfig(image=image.id, run_id=ctx.run_id,
                                                             role="bench", read_only=False))
            seconds, (image_id, started) = timed(commit_and_start)
            times.append(seconds)
            started.close()
            _remove_image(image_id)
    finally:
        box.close()
    return times


def _remove_image(image_id: str) -> None:
    """Removes an image committed for the measure, once its container is gone."""
    try:
        docker_client().images.remove(image_id, force=True)
    except Exception:  # noqa: BLE001 - a bench leftover image is not worth a crash
        pass


def fork_latency(ctx: Context, n: int, k: int = 10) -> list[Row]:
    ctx.progress(f"fork: {n} snapshots and branches after {k} steps, against in-place resets, "
                 f"replaying the steps and docker commit")
    steps = prefix(k)
    taken, branched, replayed, note = _snapshots(ctx, steps, n)
    in_place = _in_place_resets(ctx, steps, n)
    commits = _commits(ctx, steps, min(n, COMMITS))
    rows = [
        row("fork.snapshot", "env.unwrapped.snapshot()", "ms", ms(taken), note),
        row("fork.branch", "env.reset(options={'snapshot': ...}) (warm container, restore, "
            "verify)", "ms", ms(branched)),
        row("fork.reset_in_place", "verified in-place reset of a container after the same "
            "steps", "ms", ms(in_place)),
        row("fork.replay", f"env.reset() and the {k} steps again", "ms", ms(replayed)),
        row("fork.commit", "docker commit + start from the committed image (writable root; "
            "no shell state)", "ms", ms(commits)),
    ]
    rows = compare(rows, "fork.snapshot", "fork.reset_in_place")
    rows = compare(rows, "fork.branch", "fork.reset_in_place")
    rows = compare(rows, "fork.replay", "fork.branch")
    return compare(rows, "fork.commit", "fork.branch")
