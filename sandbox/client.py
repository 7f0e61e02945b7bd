"""The process's Docker client, and the translation of docker-py's errors into ours.

A process runs every container on one engine: the one :func:`use_engine` chose, else rootless
Podman's socket with ``REPOGYM_BACKEND=podman`` (see :mod:`repogym.sandbox.podman`), else
the one with the most free slots among ``REPOGYM_DOCKER_HOSTS`` (picked on first use), else
``DOCKER_HOST`` or the local socket. See :mod:`repogym.sandbox.engines`.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Iterator

import docker
import docker.errors
import requests.exceptions

from repogym import settings
from repogym.errors import DockerUnavailable, SandboxError
from repogym.sandbox import engines
from repogym.sandbox.podman import podman_engine

# What a call to the engine raises when the engine itself is gone (stopped, restarting):
# docker-py lets requests' and the socket's errors through untranslated.
UNREACHABLE: tuple[type[BaseException], ...] = (requests.exceptions.ConnectionError,
                                                 requests.exceptions.Timeout, ConnectionError)


def docker_client() -> docker.DockerClient:
    """One client per process and engine; raises :class:`DockerUnavailable` when the engine
    does not answer.

    Keyed by pid: a forked worker (an async vector env, a pool of processes) must not share
    its parent's connections.
    """
    return _client_for(os.getpid(), current_engine())


_chosen: dict[int, engines.Engine | None] = {}
_choose_lock = threading.Lock()


def current_engine() -> engines.Engine | None:
    """The engine this process uses (None: ``DOCKER_HOST`` or the local socket)."""
    pid = os.getpid()
    with _choose_lock:
        if pid not in _chosen:
            _chosen[pid] = _default_engine()
        return _chosen[pid]


def _default_engine() -> engines.Engine | None:
    if settings.BACKEND.get() == "podman":
        return podman_engine()
    listed = engines.configured()
    return engines.pick(listed) if listed else None


def use_engine_of(backend: str) -> None:
    """Makes this process's engine the one backend ``backend`` runs on: rootless Podman's
    socket for ``podman``; other backends keep the default. Refused when the process already
    chose another engine: a process runs its containers on one."""
    if backend != "podman":
        return
    engine = podman_engine()
    with _choose_lock:
        if os.getpid() not in _chosen:
            _chosen[os.getpid()] = engine
            return
        current = _chosen[os.getpid()]
    if current is None or current.url != engine.url:
        where = current.url if current is not None else "the default Docker engine"
        raise ValueError(
            f"sandbox='podman': this process already runs its containers on {where}; a "
            "process uses one engine. Open Podman envs in another process, or set "
            "REPOGYM_BACKEND=podman before the first env.")


def use_engine(engine: engines.Engine | None) -> None:
    """Makes ``engine`` this process's engine from now on (None: the default one). Containers
    already started keep the client they were started with."""
    with _choose_lock:
        _chosen[os.getpid()] = engine


@functools.lru_cache(maxsize=16)
def _client_for(pid: int, engine: engines.Engine | None) -> docker.DockerClient:
    return engines.make_client(engine)


def docker_available() -> bool:
    try:
        docker_client()
    except DockerUnavailable:
        return False
    return True


@contextlib.contextmanager
def engine_errors(what: str) -> Iterator[None]:
    """Turns every error of an engine call into :class:`DockerUnavailable` (the engine does not
    answer) or :class:`SandboxError` (it answered with an error), naming ``what`` failed.

    ``NotFound`` passes through untouched: callers decide whether a missing object is an error.
    """
    try:
        yield
    except docker.errors.NotFound:
        raise
    except UNREACHABLE as exc:
        raise DockerUnavailable(f"{what}: {_first_line(exc)}") from exc
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise SandboxError(f"{what}: {_first_line(exc)}") from exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:300]
