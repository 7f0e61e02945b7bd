"""The sandbox seam: everything that touches a container goes through :class:`Sandbox`."""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

LABEL_PREFIX = "org.repogym"
LABEL_RUN = f"{LABEL_PREFIX}.run"
LABEL_HOST = f"{LABEL_PREFIX}.owner-host"
LABEL_PID = f"{LABEL_PREFIX}.owner-pid"
LABEL_ROLE = f"{LABEL_PREFIX}.role"
LABEL_MANAGED = f"{LABEL_PREFIX}.managed"


@dataclass(frozen=True)
class ExecResult:
    """What one command produced. Failures of the command itself are data, never exceptions."""

    output: str
    exit_code: int
    timed_out: bool = False
    truncated: bool = False
    n_bytes: int = 0
    duration: float = 0.0
    shell_restarted: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


@dataclass(frozen=True)
class SandboxConfig:
    """How to start one sandbox. Limits are per container."""

    image: str
    run_id: str = field(default_factory=lambda: default_run_id())
    role: str = "agent"
    workdir: str = "/testbed"
    user: str | None = "repogym"
    network: bool = False
    memory: str = "2g"
    cpus: float = 1.0
    pids_limit: int = 256
    output_limit: int = 32_000
    tmpfs_size: str = "256m"
    cap_add: tuple[str, ...] = ()
    shell: bool = True
    env: tuple[tuple[str, str], ...] = ()
    labels: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not self.image:
            raise ValueError("SandboxConfig.image is empty: name the image to start from.")
        if self.output_limit < 256:
            raise ValueError(f"output_limit={self.output_limit} is too small: use at least 256.")
        if self.pids_limit < 16:
            raise ValueError(f"pids_limit={self.pids_limit} leaves no room for a shell: use >= 16.")
        if not 0 < self.cpus <= 64:
            raise ValueError(f"cpus={self.cpus} must be in (0, 64].")
        if not self.run_id.replace("-", "").isalnum():
            raise ValueError(f"run_id={self.run_id!r}: use letters, digits and '-' only.")


def default_run_id() -> str:
    return os.environ.get("REPOGYM_RUN_ID") or uuid.uuid4().hex[:8]


@runtime_checkable
class Sandbox(Protocol):
    """A running, isolated copy of a repository with one persistent shell."""

    workdir: str

    def run(self, command: str, timeout: float = 60.0) -> ExecResult:
        """Runs ``command`` in the persistent shell; ``cd`` and exports persist."""
        ...

    def read_file(self, path: str) -> bytes: ...

    def write_file(self, path: str, data: bytes) -> None: ...

    def copy_in(self, src: Path, dest: str) -> None:
        """Copies a host file or folder into the sandbox at ``dest`` (a folder)."""
        ...

    def copy_out(self, src: str, dest: Path) -> None:
        """Copies a sandbox file or folder into the host folder ``dest``."""
        ...

    def diff(self, base: str) -> str:
        """The repository's changes against commit ``base``, untracked files included."""
        ...

    def alive(self) -> bool: ...

    def close(self) -> None:
        """Removes everything the sandbox made; safe to call twice."""
        ...
