"""One worker plays whole episodes: its own environment and agent, retries on infrastructure
failures, and one result row per task.

Failures are sorted by where they happened, because only some of them are the agent's fault:

- ``agent``: the agent raised (its endpoint refused, it has no such task, a bug in it). The
  task counts as not resolved.
- ``infrastructure``: the environment raised a repogym error other than :class:`TaskError`
  (DockerUnavailable, SandboxError, ImageBuildError, GradingError) or a Docker or OS error.
  Retried ``retries`` times with a fresh environment; if it still fails the task is left out
  of the resolved rate and counted apart.
- ``task``: the task is malformed (:class:`TaskError`); not retried, left out of the rate.
- ``internal``: any other exception from the environment: a repogym bug, reported apart.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import socket
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import docker.errors
import gymnasium as gym

from repogym.agents.agent import close_agent
from repogym.agents.evaluation.rows import ErrorKind, ResultRow
from repogym.agents.registry import make_agent
from repogym.errors import ActionError, RepogymError, TaskError
from repogym.images.recipe import BuiltImage, image_info
from repogym.images.repository import ensure_image, image_tag
from repogym.schema import Task

if TYPE_CHECKING:
    from repogym.agents.evaluation.runner import EvalConfig

EnvFactory = Callable[["EvalConfig", list[Task], "str | None"], gym.Env]
INFRA_ERRORS: tuple[type[BaseException], ...] = (docker.errors.DockerException, OSError)


class Worker(Protocol):
    """Turns one task into one result row; the thread pool and Ray actors both drive these."""

    def run(self, task: Task) -> ResultRow: ...

    def close(self) -> None: ...


class Failure(Exception):
    """An episode that ended in an exception, with the side it came from."""

    def __init__(self, kind: ErrorKind, error: BaseException) -> None:
        super().__init__(kind, error)
        self.kind, self.error = kind, error

    def __str__(self) -> str:
        first = str(self.error).strip().splitlines()[0] if str(self.error).strip() else ""
        return f"{type(self.error).__name__}: {first}"[:500]


def env_failure(exc: BaseException) -> Failure:
    if isinstance(exc, TaskError):
        return Failure("task", exc)
    if isinstance(exc, RepogymError) and not isinstance(exc, ActionError):
        return Failure("infrastructure", exc)
    if isinstance(exc, INFRA_ERRORS):
        return Failure("infrastructure", exc)
    return Failure("internal", exc)


def ensure_image_locked(task: Task) -> BuiltImage:
    """``ensure_image`` with one builder per tag on this machine, threads and processes alike."""
    digest = hashlib.sha256(image_tag(task).encode()).hexdigest()[:16]
    lock_path = Path(tempfile.gettempdir()) / f"repogym-build-{digest}.lock"
    with lock_path.open("a") as handle:  # flock: one lock per open file, so threads too
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            return ensure_image(task, progress=lambda _msg: None)
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def make_env(config: EvalConfig, tasks: list[Task], model: str | None = None) -> gym.Env:
    """The SWE environment an eval worker plays in."""
    record_dir = Path(config.out) / "records" if config.record else None
    return gym.make("repogym/SWE-v0", tasks=tasks, reward=config.reward,
                    max_steps=config.max_steps, max_seconds=config.max_seconds,
                    record_dir=record_dir, pool_size=config.pool_size, model=model,
                    sandbox=config.backend)


def base_row(task: Task) -> ResultRow:
    return {"instance_id": task.instance_id, "repo": task.repo, "kind": task.kind,
            "split": task.split, "task_hash": task.task_hash, "resolved": False, "reward": 0.0,
            "reward_components": {}, "steps": 0, "flags": [], "truncation": None,
            "error_kind": None, "error": None, "attempts": 0, "record": None, "image": None,
            "image_id": None, "host": socket.gethostname(), "timings": {}}


def error_row(task: Task, failure: Failure, timings: dict[str, float]) -> ResultRow:
    row = base_row(task)
    row.update({"error_kind": failure.kind, "error": str(failure), "timings": timings,
                "traceback": "".join(traceback.format_exception(failure.error))[-4000:]})
    return row


def with_retries(task: Task, retries: int, attempt: Callable[[Task], ResultRow],
                 on_infra: Callable[[], None], backoff: float = 2.0) -> ResultRow:
    """Runs ``attempt`` until it succeeds, fails for a reason a retry cannot fix, or has been
    retried ``retries`` times after infrastructure failures."""
    start = time.monotonic()
    for n in range(1, retries + 2):
        try:
            row = attempt(task)
        except Failure as failure:
            if failure.kind == "infrastructure" and n <= retries:
                on_infra()
                time.sleep(backoff * n)
                continue
            row = error_row(task, failure, {"total": time.monotonic() - start})
        row["attempts"] = n
        return row
    raise AssertionError("unreachable")


class EpisodeWorker:
    """Plays tasks one after another with one environment and one agent."""

    def __init__(self, config: EvalConfig, tasks: list[Task],
                 env_factory: EnvFactory | None = None) -> None:
        self.config, self.tasks = config, tasks
        self.env_factory: EnvFactory = env_factory or make_env
        # the real environment builds images itself; doing it first, under a lock, keeps
        # workers that start together from building the same image side by side
        self.build_images = env_factory is None
        self.agent = make_agent(config.agent, tasks, **config.agent_options)
        self.env: gym.Env | None = None
        self._image_ids: dict[str, str] = {}

    def run(self, task: Task) -> ResultRow:
        return with_retries(task, self.config.retries, self._episode, self._drop_env,
                            self.config.retry_backoff)

    def _episode(self, task: Task) -> ResultRow:
        row, t = base_row(task), {"reset": 0.0, "agent": 0.0, "env": 0.0, "grading": 0.0}
        start = time.monotonic()
        if self.build_images:
            self._call_env(t, "reset", ensure_image_locked, task)
        env = self._env()
        obs, info = self._call_env(t, "reset", functools.partial(
            env.reset, options={"task_id": task.instance_id}))
        row.update({"record": info.get("record"), "image": info.get("image"),
                    "image_id": self._image_id(info.get("image"))})
        self._call_agent(t, self.agent.reset, obs, info)
        done, reward = False, 0.0
        try:
            while not done:
                action = self._call_agent(t, self.agent.act, obs, info)
                obs, reward, terminated, truncated, info = self._call_env(t, "env", env.step,
                                                                          action)
                done = terminated or truncated
                row["steps"] += 1
        finally:  # a harness still waiting on its command's result ends with the episode
            self._call_agent(t, close_agent, self.agent)
        t["grading"] = float((info.get("grading") or {}).get("total_seconds") or 0.0)
        t["env"] = max(0.0, t["env"] - t["grading"])
        t["total"] = time.monotonic() - start
        patch = info.get("patch")
        row.update({"resolved": bool(info.get("resolved")), "reward": float(reward),
                    "timings": t, "reward_components": info.get("reward_components") or {},
                    "flags": list(info.get("flags") or []), "truncation": info.get("truncation"),
                    "empty_patch": not (patch or "").strip() if patch is not None else None,
                    "agent_stop": getattr(self.agent, "stop_reason", None)})
        return row

    def _call_env(self, t: dict[str, float], phase: str, fn: Callable[..., Any], *args: Any
                  ) -> Any:
        started = time.monotonic()
        try:
            return fn(*args)
        except Exception as exc:  # noqa: BLE001 - sorted into a failure kind, never dropped
            raise env_failure(exc) from exc
        finally:
            t[phase] += time.monotonic() - started

    def _call_agent(self, t: dict[str, float], fn: Callable[..., Any], *args: Any) -> Any:
        started = time.monotonic()
        try:
            return fn(*args)
        except Exception as exc:  # noqa: BLE001 - an agent failure, reported as one
            raise Failure("agent", exc) from exc
        finally:
            t["agent"] += time.monotonic() - started

    def _env(self) -> gym.Env:
        if self.env is None:
            try:
                self.env = self.env_factory(self.config, self.tasks,
                                            getattr(self.agent, "model_name", None))
            except Exception as exc:  # noqa: BLE001 - sorted into a failure kind
                raise env_failure(exc) from exc
        return self.env

    def _image_id(self, tag: str | None) -> str | None:
        if not tag:
            return None
        if tag not in self._image_ids:
            try:
                self._image_ids[tag] = str(image_info(tag)["id"])
            except Exception:  # noqa: BLE001 - a row without the digest is still a row
                return None
        return self._image_ids[tag]

    def _drop_env(self) -> None:
        """After an infrastructure failure the environment may be half broken: start afresh."""
        env, self.env = self.env, None
        if env is not None:
            try:
                env.close()
            except Exception:  # noqa: BLE001 - the old env is being thrown away anyway
                pass

    def close(self) -> None:
        close_agent(self.agent)
        self._drop_env()
