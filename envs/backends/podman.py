"""The podman backend: the Docker backend on rootless Podman's Docker-compatible socket.

Everything is the Docker backend's (images built with the same steps, or copied from another
engine by their content tag; containers from the warm pool; grading in a fresh container);
only the engine differs. A process runs its containers on one engine (see
:mod:`repogym.sandbox.client`): the first env opened on Podman makes it the process's
engine, and an env asking for Podman in a process that already runs on another engine is
refused (start another process, or set ``REPOGYM_BACKEND=podman`` before the first env).
"""

from __future__ import annotations

from repogym.envs.backends.docker import docker_backend
from repogym.envs.backends.seams import Backend, BackendSettings
from repogym.sandbox import client


def podman_backend(settings: BackendSettings) -> Backend:
    client.use_engine_of("podman")
    return docker_backend(settings)
