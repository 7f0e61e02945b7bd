"""The process's Docker client, and the translation of docker-py's errors into ours."""

from __future__ import annotations

import functools
import os

import docker
import docker.errors

from repogym.errors import DockerUnavailable


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
