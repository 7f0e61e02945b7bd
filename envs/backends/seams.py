"""The three seams an env stands on: where its images come from, where its sandboxes come from,
and who grades. A backend is one of each, chosen together by name (see the package)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from repogym.envs.grading.grader import GraderConfig, GradingReport
from repogym.images.recipe import BuiltImage
from repogym.sandbox.base import Sandbox
from repogym.schema import Task


class ImageProvider(Protocol):
    """A task's starting point: an image, or what stands for one."""

    def ensure(self, task: Task) -> BuiltImage:
        """The task's image, made unless it exists (remembered for the provider's life)."""
        ...

    def provenance(self, image: BuiltImage) -> dict[str, Any]:
        """What names the image and the engine that runs it, for records: ``image`` (a
        digest), ``docker_engine`` (the engine's version or None), ``engine`` (its kind:
        ``docker``, ``podman``, or None)."""
        ...


class SandboxProvider(Protocol):
    """Where an env's sandboxes come from and go back to."""

    def acquire(self, image: BuiltImage, returning: Sandbox | None) -> Sandbox:
        """A started sandbox of ``image``; ``returning``, the env's last one, goes back in the
        same call (a pool resets it in place while the next episode runs)."""
        ...

    def release(self, sandbox: Sandbox) -> None:
        """Takes a used sandbox back (reset for reuse, or removed)."""
        ...

    def discard(self, sandbox: Sandbox) -> None:
        """Removes a sandbox: its env is closing."""
        ...

    def close(self) -> None:
        """Lets go of everything held for the env; a later ``acquire`` opens it again."""
        ...


class EpisodeGrader(Protocol):
    """Grades a submitted patch where the agent cannot reach."""

    def warm(self, image: str) -> None:
        """Prepares to grade a task of ``image`` while the agent works (or does nothing)."""
        ...

    def grade(self, task: Task, patch: str, image: str) -> GradingReport: ...


@dataclass(frozen=True)
class BackendSettings:
    """The env's arguments that decide its backend (see :class:`~repogym.envs.swe_env.SWEEnv`)."""

    run_id: str
    output_limit: int = 16_000
    pool_size: int | None = None
    reuse_containers: bool = True
    warm_grader: bool = True
    grader: GraderConfig | None = None

    def __post_init__(self) -> None:
        if self.pool_size is not None and self.pool_size < 0:
            raise ValueError(f"pool_size={self.pool_size}: use None (the shared default) or >= 0")


@dataclass(frozen=True)
class Backend:
    """One image provider, one sandbox provider and one grader that belong together."""

    images: ImageProvider
    sandboxes: SandboxProvider
    grader: EpisodeGrader
