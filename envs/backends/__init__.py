"""Backends of the env, by name: ``docker`` (real containers, the default), ``podman`` (the same
on rootless Podman's Docker-compatible socket), ``bwrap`` (the daemonless sandbox: bubblewrap
over images exported as root file systems), and ``fake`` (a local folder and a local test
run: no Docker at all, for fast tests of the code above the sandbox; it isolates nothing).
``REPOGYM_BACKEND`` names the one an env gets when it names none."""

from __future__ import annotations

from collections.abc import Callable

from repogym.envs.backends.bwrap import bwrap_backend
from repogym.envs.backends.docker import docker_backend
from repogym.envs.backends.fake import fake_backend
from repogym.envs.backends.podman import podman_backend
from repogym.envs.backends.seams import (
    Backend,
    BackendSettings,
    EpisodeGrader,
    ImageProvider,
    SandboxProvider,
)

BACKENDS: dict[str, Callable[[BackendSettings], Backend]] = {
    "docker": docker_backend, "podman": podman_backend, "bwrap": bwrap_backend,
    "fake": fake_backend}


def check_backend(name: str) -> str:
    """``name`` when it is a backend's; raises ``ValueError`` naming the valid ones."""
    if name not in BACKENDS:
        raise ValueError(f"sandbox={name!r}: use one of {sorted(BACKENDS)}")
    return name


def open_backend(name: str, settings: BackendSettings) -> Backend:
    """The backend called ``name``; an unknown name raises ``ValueError`` naming the valid ones."""
    return BACKENDS[check_backend(name)](settings)


__all__ = ["BACKENDS", "Backend", "BackendSettings", "EpisodeGrader", "ImageProvider",
           "SandboxProvider", "check_backend", "open_backend"]
