"""What every benchmark section shares: summary statistics, result rows, timing helpers."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import gymnasium as gym

from repogym.envs.pooling import Pool
from repogym.envs.registration import ENV_ID
from repogym.envs.swe_env import SWEEnv
from repogym.errors import RepogymError
from repogym.progress import Progress
from repogym.sandbox.docker import DockerSandbox
from repogym.sandbox.pool import SandboxPool
from repogym.schema import Task


@dataclass(frozen=True)
class Stat:
    """Median and 10th-90th percentile spread of repeated samples."""

    n: int
    median: float
    p10: float
    p90: float
    mean: float
    min: float
    max: float

    @classmethod
    def of(cls, samples: list[float]) -> Stat:
        if not samples:
            raise ValueError("no samples to summarise: raise the repetition count above 0")
        xs = sorted(samples)
        if len(xs) == 1:
            p10 = p90 = xs[0]
        else:
            deciles = statistics.quantiles(xs, n=10, method="inclusive")
            p10, p90 = deciles[0], deciles[-1]
        return cls(len(xs), statistics.median(xs), p10, p90, statistics.fmean(xs), xs[0], xs[-1])


@dataclass(frozen=True)
class Row:
    """One measured figure. ``ratio`` compares it with the row named by ``vs``."""

    key: str  # stable name for the JSON, e.g. "step.repogym.true"
    section: str
    name: str
    unit: str  # "ms", "s", "steps/s", "MiB"
    stat: Stat | None  # None: not measured (``note`` says why)
    vs: str | None = None
    ratio: float | None = None  # this median / that median
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Context:
    """One benchmark run: the task, its image, and what every section adds to."""

    task: Task
    image: str
    run_id: str
    progress: Progress
    closes: list[float] = field(default_factory=list)  # env.close() seconds, every env


def make_env(ctx: Context, **kwargs: Any) -> gym.Env[Any, Any]:
    """An env made the way users make it (``gym.make``) on the benchmark's one task."""
    return gym.make(ENV_ID, tasks=[ctx.task], suite=None, run_id=ctx.run_id, **kwargs)


def close_env(ctx: Context, env: gym.Env[Any, Any]) -> None:
    start = time.perf_counter()
    env.close()
    ctx.closes.append(time.perf_counter() - start)


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def wait_for(predicate: Callable[[], bool], seconds: float = 60.0, what: str = "") -> float:
    """Polls until ``predicate()``; returns the seconds waited."""
    start = time.perf_counter()
    while not predicate():
        if time.perf_counter() - start > seconds:
            raise RepogymError(f"waited {seconds:.0f} s for {what or 'a condition'}: is the "
                               "machine overloaded? `repogym doctor` checks the engine")
        time.sleep(0.005)
    return time.perf_counter() - start


def swe(env: gym.Env[Any, Any]) -> SWEEnv:
    """The env under gymnasium's wrappers, where the benchmarks reach its sandbox and pool."""
    base = env.unwrapped
    assert isinstance(base, SWEEnv), f"not the SWE env: {type(base).__name__}"
    return base


def docker_box(env: gym.Env[Any, Any]) -> DockerSandbox:
    """The env's sandbox, a Docker container: what the benchmarks measure."""
    box = swe(env).sandbox
    assert isinstance(box, DockerSandbox), f"not a Docker sandbox: {type(box).__name__}"
    return box


def env_pool(env: gym.Env[Any, Any]) -> Pool:
    """The env's pool of containers (made with pool_size >= 1)."""
    pool = swe(env).pool
    assert pool is not None, "the env has no pool: make it with pool_size >= 1"
    return pool


def ready_count(env: gym.Env[Any, Any], role: str = "agent") -> int:
    """Containers the env's pool holds ready for its image."""
    base = env.unwrapped
    pool, image = getattr(base, "pool", None), getattr(base, "image", None)
    if pool is None or image is None:
        return 0
    return int(pool.ready_count(image.tag, role))


def settle(envs: list[gym.Env[Any, Any]], seconds: float = 120.0) -> None:
    """Waits until no env's pool starts, resets or removes a container in the background, and
    every ready grading container's waiting pytest processes imported pytest: a sample taken
    meanwhile would time that work too (on two cores one container's start is most of a
    grade), and the envs of one comparison would weigh on each other's samples."""
    local = [(e, p) for e, p in ((e, env_pool(e)) for e in envs) if isinstance(p, SandboxPool)]
    wait_for(lambda: not any(p.busy() for _, p in local), seconds,
             "the pools' background work")
    for env, pool in local:
        image = getattr(env.unwrapped, "image", None)
        for box in pool.ready_boxes(image.tag, "grader") if image is not None else []:
            for process in (getattr(box, "pytest", None), getattr(box, "decoy_pytest", None)):
                if process is not None:
                    process.wait_ready(seconds)


def ms(seconds: list[float]) -> list[float]:
    return [s * 1000.0 for s in seconds]


def row(key: str, name: str, unit: str, samples: list[float] | None, note: str = "") -> Row:
    section = key.split(".", 1)[0]
    return Row(key, section, name, unit, Stat.of(samples) if samples else None, note=note)


def compare(rows: list[Row], key: str, vs: str) -> list[Row]:
    """Sets ``rows[key].ratio`` to its median over ``rows[vs]``'s median."""
    by_key = {r.key: r for r in rows}
    a, b = by_key.get(key), by_key.get(vs)
    if a is None or b is None or a.stat is None or b.stat is None or b.stat.median <= 0:
        return rows
    ratio = a.stat.median / b.stat.median
    return [replace(r, vs=vs, ratio=ratio) if r.key == key else r for r in rows]
