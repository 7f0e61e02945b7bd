"""Step and reset latency, and steps per second with several envs at once.

Each comparison runs on the same container (step) or the same image (reset) in the same
process. Step variants take turns in blocks of calls, so that a burst of load from elsewhere on
the machine hits all of them alike while no variant pays for the engine's clean-up after
another. Reset variants run one after another, each in a loop of its own.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym

from repogym.bench.core import (
    Context,
    Row,
    close_env,
    compare,
    docker_box,
    env_pool,
    make_env,
    ms,
    ready_count,
    row,
    timed,
    wait_for,
)
from repogym.envs.registration import ENV_ID
from repogym.errors import RepogymError
from repogym.sandbox import owners
from repogym.sandbox.base import LABEL_RUN
from repogym.sandbox.client import docker_client

STEP_COMMANDS = ("true", "ls")
WARMUP = 3
BLOCK = 20  # calls of one method in a row
SETTLE = 0.2  # seconds between blocks


def _interleaved(methods: dict[str, Callable[[], Any]], n: int) -> dict[str, list[float]]:
    """``n`` timings of each method, in blocks of ``BLOCK`` calls that take turns (the order
    rotating every round), with a pause between blocks: a `docker exec` leaves the engine busy
    for a while after it returns, and on a small machine that work must not land in the next
    method's timings."""
    names = list(methods)
    for name in names:
        for _ in range(WARMUP):
            methods[name]()
    out: dict[str, list[float]] = {name: [] for name in names}
    rounds = -(-n // BLOCK)
    for i in range(rounds):
        for name in names[i % len(names):] + names[: i % len(names)]:
            time.sleep(SETTLE)
            for _ in range(min(BLOCK, n - len(out[name]))):
                out[name].append(timed(methods[name])[0])
    return out


# --- step ----------------------------------------------------------------------------------------

def _step_methods(env: Any, command: str) -> dict[str, Callable[[], Any]]:
    box = docker_box(env)
    user, workdir, container = box.user or "root", box.workdir, box.container
    argv = ["docker", "exec", "-u", user, "-w", workdir, container.name, command]

    def via_env() -> None:
        _, _, _, _, info = env.step({"tool": "bash", "command": command})
        if info.get("exit_code") != 0:
            raise RuntimeError(f"env.step bash {command!r} failed: {info}")

    def via_cli() -> None:
        subprocess.run(argv, check=True, capture_output=True)

    def via_docker_py() -> None:
        result = container.exec_run([command], user=user, workdir=workdir)
        if result.exit_code != 0:
            raise RuntimeError(f"exec_run {command!r} exited {result.exit_code}")

    def via_shell() -> None:  # the sandbox alone: what the env layer adds is the difference
        if box.run(command).exit_code != 0:
            raise RuntimeError(f"DockerSandbox.run({command!r}) failed")

    return {"repogym": via_env, "shell": via_shell, "docker_exec": via_cli,
            "exec_run": via_docker_py}


STEP_NAMES = {
    "repogym": "repogym env.step(bash {c!r})",
    "shell": "repogym DockerSandbox.run({c!r}) (the shell alone)",
    "docker_exec": "`docker exec CONTAINER {c}` (subprocess)",
    "exec_run": "docker-py container.exec_run({c!r})",
}


def step_latency(ctx: Context, n: int) -> list[Row]:
    ctx.progress(f"step latency: {n} x {len(STEP_NAMES)} methods x {STEP_COMMANDS}")
    env = make_env(ctx, pool_size=0, warm_grader=False, max_steps=10**6)
    rows: list[Row] = []
    try:
        env.reset(seed=0)
        for command in STEP_COMMANDS:
            samples = _interleaved(_step_methods(env, command), n)
            for method, name in STEP_NAMES.items():
                rows.append(row(f"step.{method}.{command}", name.format(c=command), "ms",
                                ms(samples[method])))
            for method in ("shell", "docker_exec", "exec_run"):
                rows = compare(rows, f"step.{method}.{command}", f"step.repogym.{command}")
    finally:
        close_env(ctx, env)
    return rows


# --- reset ---------------------------------------------------------------------------------------

def _dirty(env: Any) -> None:
    """What an agent leaves behind, so the in-place reset has real work to do."""
    env.step({"tool": "bash", "command": "echo bench >> README.md; echo x > new_file.py; "
                                          "mkdir -p /tmp/bench && touch /tmp/bench/x"})


def _warm_resets(ctx: Context, n: int) -> tuple[list[float], list[float], str]:
    env = make_env(ctx, pool_size=1, reuse_containers=True, warm_grader=False)
    times: list[float] = []
    refills: list[float] = []
    stopped = ""
    try:
        env.reset(seed=0)
        pool = env_pool(env)
        hits = pool.stats["hits"]
        for _ in range(n):
            _dirty(env)
            try:
                refills.append(wait_for(lambda: ready_count(env) >= 1, what="a ready container"))
            except RepogymError as exc:  # a pool that stops refilling is a finding, not a crash
                stopped = f"; not measured after {len(times)} resets: {exc} (pool {pool.stats})"
                break
            times.append(timed(lambda: env.reset(seed=0))[0])
        hits = pool.stats["hits"] - hits
        note = (f"{hits}/{len(times)} from the pool; {pool.stats['reused']} reset in place, "
                f"{pool.stats['discarded']} discarded{stopped}")
    finally:
        close_env(ctx, env)
    return times, refills, note


def _run_containers(ctx: Context) -> int:
    # one listing call: containers removed meanwhile must not break the count
    return len(docker_client().api.containers(
        all=True, filters={"label": f"{LABEL_RUN}={ctx.run_id}"}))


def _fresh_resets(ctx: Context, n: int) -> list[float]:
    env = make_env(ctx, pool_size=0, reuse_containers=False, warm_grader=False)
    times = []
    try:
        env.reset(seed=0)
        for _ in range(n):
            _dirty(env)
            times.append(timed(lambda: env.reset(seed=0))[0])
            # the old container is removed in the background: not during the next sample
            wait_for(lambda: _run_containers(ctx) <= 1, what="the used container's removal")
    finally:
        close_env(ctx, env)
    return times


def _bare_starts(ctx: Context, n: int) -> list[float]:
    """docker-py's plain ``containers.run`` (no limits, no shell): the floor of a fresh start."""
    client, times = docker_client(), []
    labels = {**owners.owner_labels(), LABEL_RUN: ctx.run_id}
    for _ in range(n):
        seconds, container = timed(lambda: client.containers.run(
            ctx.image, ["sleep", "infinity"], detach=True, init=True, labels=labels,
            network_mode="none"))
        times.append(seconds)
        container.remove(force=True)
    return times


def _default_resets(ctx: Context, n: int) -> tuple[list[float], list[float], str]:
    """The settings a user gets without arguments: ``n`` resets after an episode that lasts
    as long as the in-place reset of the last container takes (any agent's does), then ``n``
    back to back (one step between resets), where each reset waits for that in-place reset."""
    env: Any = gym.make(ENV_ID, tasks=[ctx.task])  # the task and nothing else
    paced: list[float] = []
    tight: list[float] = []
    try:
        env.reset(seed=0)
        pool = env_pool(env)
        for _ in range(n):
            _dirty(env)
            wait_for(lambda: ready_count(env) >= 1, what="the default pool's spare container")
            paced.append(timed(lambda: env.reset(seed=0))[0])
        for _ in range(n):
            _dirty(env)
            tight.append(timed(lambda: env.reset(seed=0))[0])
        stats = pool.stats
        note = (f"{stats['hits']} from the pool ({stats['waited']} after waiting for one), "
                f"{stats['misses']} started")
    finally:
        close_env(ctx, env)
    return paced, tight, note


def reset_latency(ctx: Context, n: int) -> list[Row]:
    ctx.progress(f"reset latency: {n} resets from a warm pool, {n} with a fresh container, "
                 f"{2 * n} with the default settings")
    warm, refills, note = _warm_resets(ctx, n)
    fresh = _fresh_resets(ctx, n)
    bare = _bare_starts(ctx, n)
    default, tight, default_note = _default_resets(ctx, n)
    rows = [
        row("reset.warm", "env.reset(), warm pool (pool_size=1, reuse_containers)", "ms", ms(warm),
            note),
        row("reset.default", "env.reset(), default settings (gym.make with the task only)", "ms",
            ms(default), default_note),
        row("reset.default_back_to_back", "env.reset() one step after the last, default "
            "settings (waits for the last container's in-place reset)", "ms", ms(tight)),
        row("reset.fresh", "env.reset(), fresh container (pool_size=0, no reuse)", "ms",
            ms(fresh)),
        row("reset.bare_run", "docker-py containers.run (bare: no limits, no shell)", "ms",
            ms(bare)),
        row("reset.refill", "pool ready again after reset (background, not on the clock)", "ms",
            ms(refills)),
    ]
    rows = compare(rows, "reset.fresh", "reset.warm")
    rows = compare(rows, "reset.default_back_to_back", "reset.default")
    return compare(rows, "reset.bare_run", "reset.warm")


# --- steps per second with several envs ----------------------------------------------------------

def _drive(env: Any, clock: dict[str, float], done: list[float], lat: list[float],
           go: threading.Barrier, errors: list[BaseException]) -> None:
    try:
        go.wait()
        while time.perf_counter() < clock["until"]:
            seconds, (_, _, _, _, info) = timed(
                lambda: env.step({"tool": "bash", "command": "true"}))
            if info.get("exit_code") != 0:
                raise RuntimeError(f"bash `true` failed in a parallel env: {info}")
            done.append(time.perf_counter())
            lat.append(seconds)
    except BaseException as exc:  # noqa: BLE001 - handed to the main thread, which raises it
        errors.append(exc)


def _throughput(ctx: Context, k: int, seconds: float) -> tuple[list[float], list[float]]:
    """Steps/s per time window, and step latencies, with ``k`` envs stepping at once."""
    envs = [make_env(ctx, pool_size=0, warm_grader=False, max_steps=10**7) for _ in range(k)]
    try:
        for env in envs:
            env.reset(seed=0)
            for _ in range(WARMUP):
                env.step({"tool": "bash", "command": "true"})
        done: list[float] = []
        lat: list[float] = []
        errors: list[BaseException] = []
        clock: dict[str, float] = {}

        def set_clock() -> None:  # runs once, when every thread is at the barrier
            clock["start"] = time.perf_counter()
            clock["until"] = clock["start"] + seconds

        go = threading.Barrier(k + 1, action=set_clock)
        threads = [threading.Thread(target=_drive, args=(e, clock, done, lat, go, errors))
                   for e in envs]
        for t in threads:
            t.start()
        go.wait()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
    finally:
        for env in envs:
            close_env(ctx, env)
    windows, start, until = 5, clock["start"], clock["until"]
    width = (until - start) / windows
    counts = [0] * windows
    for stamp in done:
        if start <= stamp < until:
            counts[min(windows - 1, int((stamp - start) / width))] += 1
    return [c / width for c in counts], lat


def parallel_steps(ctx: Context, levels: tuple[int, ...], seconds: float) -> list[Row]:
    rows: list[Row] = []
    for k in levels:
        ctx.progress(f"steps/s: {k} env(s) stepping `true` for {seconds:g} s")
        rates, lat = _throughput(ctx, k, seconds)
        rows.append(row(f"parallel.steps_per_s.{k}", f"steps/s, {k} env(s) in threads",
                        "steps/s", rates, f"{len(lat)} steps; spread over 5 time windows"))
        rows.append(row(f"parallel.latency.{k}", f"step latency, {k} env(s) in threads", "ms",
                        ms(lat)))
        if k != levels[0]:
            rows = compare(rows, f"parallel.steps_per_s.{k}", f"parallel.steps_per_s.{levels[0]}")
    return rows
