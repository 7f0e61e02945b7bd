"""What a sandbox with a persistent shell does with files, through that shell: reading,
writing, copying in and out, and the repository's diff. A shell command is what works on every
engine, on tmpfs mounts and under a read-only root (Docker's archive API sees neither), and in
a sandbox without an engine at all."""

from __future__ import annotations

import base64
import io
import shlex
import tarfile
from pathlib import Path

from repogym.errors import SandboxError
from repogym.sandbox.base import ExecResult
from repogym.sandbox.shell import Shell
from repogym.sandbox.util import git_diff_command

# Internal commands run with a clean PATH so an agent's exported PATH cannot redirect them.
SAFE_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
FILE_LIMIT = 64 * 1024 * 1024


class ShellFiles:
    """File operations for a sandbox whose ``_shell`` runs its commands (``run``)."""

    name: str
    workdir: str
    _shell: Shell | None

    def run(self, command: str, timeout: float = 60.0) -> ExecResult:
        raise NotImplementedError

    def _internal(self, command: str, timeout: float = 60.0, limit: int = FILE_LIMIT) -> ExecResult:
        """Runs a command of ours (not the agent's) with a clean PATH and a large output cap."""
        if self._shell is None:
            raise SandboxError(f"{self.name} is closed")
        saved = self._shell.output_limit
        self._shell.output_limit = limit
        try:
            # a nested subshell: nothing of ours (PATH, cwd) may persist into the agent's shell
            return self.run(f"( {SAFE_PATH}; {command}\n)", timeout)
        finally:
            if self._shell is not None:
                self._shell.output_limit = saved

    def run_quiet(self, command: str, timeout: float = 60.0, limit: int = FILE_LIMIT
                  ) -> ExecResult:
        """Runs a command of ours in the agent's shell as it is (its PATH, its folder; what it
        exports persists), with a large output cap: reading and setting the shell's state."""
        if self._shell is None:
            raise SandboxError(f"{self.name} is closed")
        saved = self._shell.output_limit
        self._shell.output_limit = limit
        try:
            return self.run(command, timeout)
        finally:
            if self._shell is not None:
                self._shell.output_limit = saved

# --- files -------------------------------------------------------------------------------

    def _abs(self, path: str) -> str:
        return path if path.startswith("/") else f"{self.workdir.rstrip('/')}/{path}"

    def read_file(self, path: str) -> bytes:
        target = shlex.quote(self._abs(path))
        result = self._internal(
            f"if [ -d {target} ]; then echo ISDIR; exit 3; fi; "
            f"[ -e {target} ] || {{ echo MISSING; exit 2; }}; "
            f"[ $(stat -c %s {target}) -le {FILE_LIMIT // 2} ] || {{ echo TOOBIG; exit 4; }}; "
            f"base64 -w0 -- {target}"
        )
        if result.exit_code == 2:
            raise FileNotFoundError(path)
        if result.exit_code == 3:
            raise IsADirectoryError(path)
        if result.exit_code == 4:
            raise SandboxError(
                f"{path} is larger than {FILE_LIMIT // 2} bytes: read a range with bash.")
        if result.exit_code != 0:
            raise PermissionError(f"{path}: {result.output.strip()[:200]}")
        return base64.b64decode(result.output)

    def write_file(self, path: str, data: bytes) -> None:
        target = shlex.quote(self._abs(path))
        encoded = base64.b64encode(data).decode()
        result = self._internal(
            f"mkdir -p -- \"$(dirname -- {target})\" && "
            f"printf %s '{encoded}' | base64 -d > {target}"
        )
        if result.exit_code != 0:
            raise PermissionError(f"cannot write {path}: {result.output.strip()[:200]}")

    # Copies go through the shell as a base64 tar stream: the archive API cannot see tmpfs.
    def copy_in(self, src: Path, dest: str) -> None:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            tar.add(str(src), arcname=src.name)
        target = shlex.quote(self._abs(dest))
        encoded = base64.b64encode(buf.getvalue()).decode()
        result = self._internal(f"mkdir -p -- {target} && printf %s '{encoded}' | base64 -d | "
                                f"tar -x --no-same-owner -C {target}")
        if result.exit_code != 0:
            raise SandboxError(f"could not copy {src} into {self.name}:{dest}: {result.output}")

    def copy_out(self, src: str, dest: Path) -> None:
        path = self._abs(src).rstrip("/") or "/"
        parent, name = path.rsplit("/", 1)
        result = self._internal(f"[ -e {shlex.quote(path)} ] || exit 2; tar -c -C "
                                f"{shlex.quote(parent or '/')} -- {shlex.quote(name)} | base64 -w0")
        if result.exit_code == 2:
            raise FileNotFoundError(src)
        if result.exit_code != 0:
            raise SandboxError(f"could not copy {self.name}:{src} out: {result.output[:300]}")
        dest.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(base64.b64decode(result.output)), mode="r") as tar:
            tar.extractall(dest, filter="data")

    def diff(self, base: str) -> str:
        """The diff as text; bytes that are not UTF-8 survive as surrogate escapes."""
        result = self._internal(
            f"set -o pipefail; ( {git_diff_command(self.workdir, base)} ) | base64 -w0", timeout=120
        )
        try:
            raw = base64.b64decode(result.output, validate=True)
        except ValueError:
            raw = result.output.encode()
        if result.exit_code != 0:
            raise SandboxError(f"could not compute the diff in {self.name}: {raw[-300:]!r}")
        return raw.decode("utf-8", errors="surrogateescape")
