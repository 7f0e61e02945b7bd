"""Byte streams to processes in a container over ``docker exec`` sockets.

The engine multiplexes stdout and stderr into frames with an 8-byte header; both readers here
take the payload of every frame in order (the shell merges stderr into stdout anyway).
"""

from __future__ import annotations

import select
import socket
import struct
import time
from typing import Any

import docker.errors

from repogym.sandbox.base import SandboxLost
from repogym.sandbox.client import engine_errors


class FrameReader:
    """Demultiplexes the engine's frames from a socket without copying the buffer per frame."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._buf = bytearray()
        self._pos = 0
        self._frame_left = 0

    def take(self) -> bytes:
        """Payload bytes available in the buffer."""
        out = bytearray()
        buf = self._buf
        while self._pos < len(buf):
            if self._frame_left == 0:
                if len(buf) - self._pos < 8:
                    break
                self._frame_left = struct.unpack_from(">I", buf, self._pos + 4)[0]
                self._pos += 8
                continue
            n = min(self._frame_left, len(buf) - self._pos)
            out += buf[self._pos : self._pos + n]
            self._pos += n
            self._frame_left -= n
        del buf[: self._pos]
        self._pos = 0
        return bytes(out)

    def pending(self) -> bool:
        return len(self._buf) > self._pos

    def fill(self) -> bool:
        """Reads what the socket has; False at the end of the stream."""
        try:
            chunk = self.sock.recv(262144)
        except OSError:
            chunk = b""
        self._buf += chunk
        return bool(chunk)


class RawReader(FrameReader):
    """A :class:`FrameReader` for a stream that is not framed (a socket pair to a process)."""

    def take(self) -> bytes:
        out = bytes(self._buf)
        self._buf.clear()
        return out

    def pending(self) -> bool:
        return bool(self._buf)


class SocketTransport:
    """The shell protocol over a ``docker exec`` socket."""

    def __init__(self, raw: Any, container: Any, user: str | None):
        self._sock: socket.socket = getattr(raw, "_sock", raw)
        self._keep = raw  # the engine's response object behind the socket (see Runner.start)
        self._sock.setblocking(True)
        self._reader = FrameReader(self._sock)
        self._container = container
        self._user = user

    @property
    def sock(self) -> socket.socket:
        return self._sock

    def send(self, data: bytes) -> None:
        try:
            self._sock.sendall(data)
        except OSError:
            pass  # the reader sees the end of the stream

    def recv(self, timeout: float) -> bytes | None:
        out = bytearray()
        deadline = time.monotonic() + timeout
        while True:
            payload = self._reader.take()
            if payload:
                out += payload
                if not self._reader.pending():
                    return bytes(out)
                continue
            if out:
                return bytes(out)
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self._sock], [], [], max(0.0, left))
            if not ready:
                return None
            if not self._reader.fill():
                return b""

    def interrupt(self, shell_pid: int) -> None:
        """The fallback when the shell's own timer did not stop a command."""
        try:
            self._container.exec_run(["kill", "-USR1", str(shell_pid)], user=self._user or "")
        except Exception:  # noqa: BLE001 - best effort: the caller gives up on the shell later
            pass

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass


def exec_with_input(api: Any, container_id: str, argv: list[str], data: bytes,
                    user: str = "", timeout: float = 120.0) -> tuple[int, bytes]:
    """Runs ``argv`` with ``data`` on its stdin; returns its exit code and output.

    Works where the archive API does not: on tmpfs mounts and under a read-only root.
    """
    what = f"{argv[0]} in {container_id[:12]}"
    with engine_errors(f"exec {what}"):
        exec_id = api.exec_create(container_id, argv, stdin=True, stdout=True, stderr=True,
                                  user=user)["Id"]
        raw = api.exec_start(exec_id, socket=True)
        sock: socket.socket = getattr(raw, "_sock", raw)
        try:
            out = _feed(sock, data, timeout)
        finally:
            sock.close()
        return exit_code(api, exec_id, what), out


def _feed(sock: socket.socket, data: bytes, timeout: float) -> bytes:
    sock.setblocking(True)
    reader = FrameReader(sock)
    out = bytearray()
    sock.sendall(data)
    sock.shutdown(socket.SHUT_WR)  # the engine closes the process's stdin: it sees the end
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        if select.select([sock], [], [], left)[0] and not reader.fill():
            break
        out += reader.take()
    return bytes(out + reader.take())


def exit_code(api: Any, exec_id: str, what: str) -> int:
    """The exit code of a finished exec; an exec still running (or forgotten by an engine that
    restarted) after its stream ended means the stream broke, not that the command failed."""
    try:
        state = api.exec_inspect(exec_id)
    except docker.errors.NotFound as exc:
        raise SandboxLost(f"the engine lost the exec of {what} (it restarted?)") from exc
    if state.get("Running") or state.get("ExitCode") is None:
        raise SandboxLost(f"the output of {what} ended before it did (the engine restarted?)")
    return int(state["ExitCode"])
