"""The process's Docker client, and the translation of docker-py's errors into ours."""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator

import docker
import docker.errors
import requests.exceptions

from repogym.errors import DockerUnavailable, SandboxError

# What a call to the engine raises when the engine itself is gone (stopped, restarting):
# docker-py lets requests' and the socket's errors through untranslated.
UNREACHABLE: tuple[type[BaseException], ...] = (requests.exceptions.ConnectionError,
                                                 requests.exceptions.Timeout, ConnectionError)


def docker_client() -> docker.DockerClient:
    """One client per process; raises :class:`DockerUnavailable` when no engine answers.

    Keyed by pid: a forked worker (an async vector env, a pool of processes) must not share
    its parent's connections.
    """
    return _client_for(os.getpid())


@functools.lru_cache(maxsize=4)
def _client_for(pid: int) -> docker.DockerClient:
    try:
        client = docker.from_env(timeout=int(os.environ.get("REPOGYM_DOCKER_TIMEOUT", "120")))
        client.ping()
    except docker.errors.DockerException as exc:
        raise DockerUnavailable(str(exc).splitlines()[0][:200]) from exc
    return client


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
