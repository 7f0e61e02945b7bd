"""The sandbox seam: everything that touches a container goes through :class:`Sandbox`."""

from __future__ import annotations

import os
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from repogym import settings
from repogym.errors import RepogymError

LABEL_PREFIX = "org.repogym"
LABEL_RUN = f"{LABEL_PREFIX}.run"
LABEL_HOST = f"{LABEL_PREFIX}.owner-host"
LABEL_PID = f"{LABEL_PREFIX}.owner-pid"
LABEL_ROLE = f"{LABEL_PREFIX}.role"
LABEL_MANAGED = f"{LABEL_PREFIX}.managed"

# With a read-only root these are the only writable paths (besides /tmp and /dev/shm), each a
# size-limited tmpfs, so no agent can fill the host's disk. The repository and the user's home
# are filled from the image's pristine copy when the container starts.
DEFAULT_WRITABLE: tuple[tuple[str, str], ...] = (
    ("/testbed", "1g"),
    ("/home/repogym", "128m"),
    ("/var/tmp", "64m"),
    ("/opt/repogym-grade", "64m"),
)
SHM_SIZE = 64 << 20  # Docker's default /dev/shm
PROCESS_ROOM = 256 << 20
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def parse_size(text: str) -> int:
    """Bytes in a Docker size such as ``512m`` or ``2g``."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([bkmg]?)b?\s*", str(text).lower())
    if not match:
        raise ValueError(f"{text!r} is not a size")
    return int(float(match.group(1)) * _UNITS[match.group(2)])


class SandboxLost(RepogymError):
    """The container stopped or vanished under a running episode: the engine restarted, or
    someone removed it. Neither the agent's doing nor a failure it could cause (the agent runs
    unprivileged and cannot stop its container), so it is not a :class:`SandboxError` that the
    environment may turn into an observation: it propagates, and the episode runs again."""


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
    """How to start one sandbox. Limits are per container.

    ``read_only`` (default) starts the container with a read-only root file system; only the
    ``writable`` paths (path, size), ``/tmp`` (``tmpfs_size``) and ``/dev/shm`` can be written,
    all of them size-limited tmpfs counted against ``memory``. Images without the pristine
    copy that fills them start with a writable root instead.
    """

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
    read_only: bool = True
    writable: tuple[tuple[str, str], ...] = DEFAULT_WRITABLE
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
        self._check_writable()

    def _check_writable(self) -> None:
        """tmpfs pages count against the container's memory: full tmpfs mounts must still leave
        room for the processes, or filling them would make the kernel kill everything."""
        sizes = {"memory": self.memory, "tmpfs_size": self.tmpfs_size,
                 **{f"writable {path}": size for path, size in self.writable}}
        parsed = {}
        for name, text in sizes.items():
            try:
                parsed[name] = parse_size(text)
            except ValueError:
                raise ValueError(f"{name}={text!r} is not a size: write e.g. 512m or 2g.") from None
        for path, _ in self.writable:
            if not path.startswith("/") or path in ("/", "/tmp"):
                raise ValueError(f"writable path {path!r}: give an absolute path other than / "
                                 "and /tmp (/tmp is sized by tmpfs_size).")
        if not self.read_only:
            return
        if self.workdir not in {path for path, _ in self.writable}:
            raise ValueError(f"workdir={self.workdir!r} is not among the writable paths of a "
                             "read-only container: add it to writable, or pass read_only=False.")
        mounts = sum(v for k, v in parsed.items() if k != "memory") + SHM_SIZE
        if mounts > parsed["memory"] - PROCESS_ROOM:
            raise ValueError(
                f"the writable mounts hold up to {mounts >> 20} MiB, which leaves less than "
                f"{PROCESS_ROOM >> 20} MiB of memory={self.memory} for processes: lower "
                "tmpfs_size or the writable sizes, or raise memory."
            )


_process_runs: dict[int, str] = {}


def default_run_id() -> str:
    """``REPOGYM_RUN_ID``, or one id per process: the envs of one process are one run (and may
    share their pool of containers)."""
    return settings.RUN_ID.get() or _process_runs.setdefault(os.getpid(), uuid.uuid4().hex[:8])


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


@runtime_checkable
class HarnessSandbox(Protocol):
    """What the harness's own steps use of a container beside the agent's shell: one command
    outside it, and files written as root. The grader's steps and the differential harness are
    typed against it (``DockerSandbox`` is one)."""

    name: str

    def exec(self, argv: list[str], user: str | None = None, timeout: float = 60.0,
             limit: int | None = None) -> ExecResult:
        """Runs ``argv`` (not through the shell) within ``timeout``; failures are data."""
        ...

    def put_files(self, files: dict[str, bytes], dest: str, owner: int = 0) -> None:
        """Writes ``files`` (paths relative to ``dest``) as root, owned by uid ``owner``."""
        ...
