"""A sandbox made of a temporary folder and a local bash, for fast tests of the code above it.

It speaks the same shell protocol as the Docker sandbox but isolates nothing: never use it to
claim anything about isolation, limits or the network.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from repogym.errors import SandboxError
from repogym.sandbox.base import ExecResult, SandboxConfig
from repogym.sandbox.shell import Shell, ShellDied
from repogym.sandbox.util import git_diff_command, restart_note


class PipeTransport:
    """The shell protocol over a local process's pipes."""

    def __init__(self, cwd: str, env: dict[str, str]):
        self.proc = subprocess.Popen(
            ["bash", "--noprofile", "--norc", "-s"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._in = self.proc.stdin
        self._out = self.proc.stdout.fileno()

    def send(self, data: bytes) -> None:
        try:
            self._in.write(data)
            self._in.flush()
        except BrokenPipeError:
            pass

    def recv(self, timeout: float) -> bytes | None:
        ready, _, _ = select.select([self._out], [], [], timeout)
        if not ready:
            return None
        return os.read(self._out, 65536)

    def interrupt(self, shell_pid: int) -> None:
        try:
            os.kill(shell_pid, signal.SIGUSR1)
        except ProcessLookupError:
            pass

    def close(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        self._in.close()
        if self.proc.stdout:
            self.proc.stdout.close()


class FakeSandbox:
    """A local folder standing in for the container's repository root."""

    def __init__(self, config: SandboxConfig, source: Path | None = None,
                 root: Path | None = None):
        """``root``: the folder to make and work in (removed by :meth:`close`); a new
        temporary one when None."""
        self.config = config
        if root is not None:
            root.mkdir(parents=True)
            self._root = root
        else:
            self._root = Path(tempfile.mkdtemp(prefix=f"repogym-fake-{config.run_id}-"))
        self.workdir = str(self._root / "testbed")
        if source is not None:
            shutil.copytree(source, self.workdir, symlinks=True)
        else:
            os.makedirs(self.workdir)
        self._env = {**os.environ, "HOME": str(self._root), **dict(config.env)}
        self._shell: Shell | None = self._start_shell(self.workdir)
        self._closed = False

    def _start_shell(self, cwd: str) -> Shell:
        return Shell(PipeTransport(cwd, self._env), self.config.output_limit)

    def run(self, command: str, timeout: float = 60.0) -> ExecResult:
        if self._shell is None:
            raise RuntimeError("the sandbox is closed")
        try:
            return self._shell.run(command, timeout)
        except ShellDied as died:
            cwd = self._shell.cwd or self.workdir
            self._shell.close()
            self._shell = self._start_shell(cwd if os.path.isdir(cwd) else self.workdir)
            return ExecResult(restart_note(str(died), cwd), -1, shell_restarted=True)

    def _host(self, path: str) -> Path:
        p = Path(path)
        return p if p.is_absolute() else Path(self.workdir) / p

    def read_file(self, path: str) -> bytes:
        return self._host(path).read_bytes()

    def write_file(self, path: str, data: bytes) -> None:
        target = self._host(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    def copy_in(self, src: Path, dest: str) -> None:
        target = self._host(dest) / src.name
        if src.is_dir():
            shutil.copytree(src, target, symlinks=True, dirs_exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)

    def copy_out(self, src: str, dest: Path) -> None:
        source = self._host(src)
        dest.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, dest / source.name, symlinks=True, dirs_exist_ok=True)
        else:
            shutil.copy2(source, dest / source.name)

    def diff(self, base: str) -> str:
        proc = subprocess.run(["bash", "-c", git_diff_command(self.workdir, base)],
                              capture_output=True, timeout=120)
        if proc.returncode != 0:
            raise SandboxError(f"could not compute the diff: {proc.stdout[-300:]!r}")
        return proc.stdout.decode("utf-8", errors="surrogateescape")

    def alive(self) -> bool:
        return self._shell is not None and not self._closed

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._shell is not None:
            self._shell.close()
            self._shell = None
        shutil.rmtree(self._root, ignore_errors=True)
