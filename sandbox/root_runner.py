"""A root process that runs the harness's scripts in a container without a ``docker exec`` each.

Started once per container (one exec), it reads requests on its stdin: a header line (nonce,
script bytes, input bytes, seconds, and a user whose processes end first, if any), the script,
and the bytes the script gets on its stdin. It runs the script under ``timeout`` with stdout and
stderr merged, then prints an end line with the nonce and the script's exit status. A script
then costs a fork and an exec of bash in the container instead of an engine round trip (create,
start, inspect: about 70 ms here).

Nothing in the container can reach it: its stdin is the engine's pipe, which another user cannot
open through ``/proc``, and it keeps its files in a folder only root can enter (``mktemp -d``
makes it 0700). When the stream breaks, the runner is closed and the call raises: a script that
may have run is never sent twice.
"""

from __future__ import annotations

import secrets
import select
import socket
import time
from typing import TYPE_CHECKING

from repogym.resources import script
from repogym.sandbox.base import ExecResult, SandboxLost
from repogym.sandbox.client import engine_errors
from repogym.sandbox.features import engine_features
from repogym.sandbox.shell import MarkerCapture
from repogym.sandbox.transport import FrameReader

if TYPE_CHECKING:
    from repogym.sandbox.docker import DockerSandbox

READY = b"__RG_RUNNER_READY\n"
READY_WAIT = 60.0  # seconds a runner may take to say it is ready
# The loop that reads and runs requests (see the file for how, and why so)
LOOP = script("repogym.sandbox", "runner_loop.sh", bare=True)


class Runner:
    """The host's end of one runner."""

    def __init__(self, sock: socket.socket, name: str, reader: FrameReader | None = None):
        self.sock = sock
        self.reader = reader or FrameReader(sock)  # the engine's frames, or a plain stream
        self.name = name
        self.closed = False
        self.pending = b""  # what came before the ready line was seen
        self.keep: object = None

    @classmethod
    def start(cls, box: DockerSandbox, user: str = "root") -> Runner:
        """Starts a runner in ``box``'s container; it answers once its folder exists."""
        api = box.client.api
        with engine_errors(f"start a runner in {box.name}"):
            # the container's process slots, where the engine counts them (see the loop)
            limits = engine_features(box.client).limits
            slots = box.config.pids_limit if "pids" in limits else 0
            exec_id = api.exec_create(box.container.id, ["bash", "--noprofile", "--norc", "-c",
                                                         LOOP, "repogym-runner", str(slots)],
                                      stdin=True, stdout=True, stderr=True, user=user,
                                      workdir=box.workdir)["Id"]
            raw = api.exec_start(exec_id, socket=True)
        sock: socket.socket = getattr(raw, "_sock", raw)
        sock.setblocking(True)
        try:  # the loop says it is ready only after this line (see runner_loop.sh)
            sock.sendall(b"\n")
        except OSError as exc:
            raise SandboxLost(f"the runner in {box.name} did not start: {exc}") from exc
        runner = cls(sock, box.name)
        # the engine's response object stays with the socket it hijacked, as the engine's
        # client intends: collected, it closes or hands back what the socket rides on
        runner.keep = raw
        return runner

    def _read(self, deadline: float) -> bytes:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([self.sock], [], [], left)[0]:
            return b""
        if not self.reader.fill():
            self.close()
            raise SandboxLost(f"the runner in {self.name} stopped (the container is gone?)")
        return self.reader.take()

    def run(self, script: str, data: bytes = b"", timeout: float = 120.0,
            limit: int = 64 * 1024 * 1024, end_user: int | None = None,
            spare: int | None = None) -> ExecResult:
        """Runs ``script`` with bash, ``data`` on its stdin; its time limit is the container's
        ``timeout``, as with ``DockerSandbox.exec``. With ``end_user`` (a uid), every process of
        that user but ``spare`` (a pid in the container) is killed first, even when they hold
        all the container's process slots."""
        if self.closed:
            raise SandboxLost(f"the runner in {self.name} was closed")
        start = time.monotonic()
        deadline = start + timeout + 30  # past the limit (and `timeout -k 5`): the runner is lost
        # a runner says it is ready once its folder exists, long before its first request as
        # a rule: one that has not in a minute never will (its stream is lost)
        ready_by = min(deadline, start + READY_WAIT)
        while not self.pending.endswith(READY):
            chunk = self._read(ready_by)
            if not chunk:
                self.close()
                raise SandboxLost(f"the runner in {self.name} did not start")
            self.pending += chunk
        nonce = secrets.token_hex(8)
        body = script.encode("utf-8", errors="surrogateescape")
        user = "" if end_user is None else f" {int(end_user)}"
        if end_user is not None and spare is not None:
            user += f":{int(spare)}"
        header = f"{nonce} {len(body)} {len(data)} {max(1, int(timeout))}{user}\n".encode()
        try:
            self.sock.sendall(header + body + data)
        except OSError as exc:
            self.close()
            raise SandboxLost(f"the runner in {self.name} stopped: {exc}") from exc
        capture = MarkerCapture(limit, f"\n__RG_DONE_{nonce} ".encode())
        end = None
        while end is None:
            chunk = self._read(deadline)
            if not chunk and time.monotonic() >= deadline:
                self.close()
                raise SandboxLost(f"the runner in {self.name} did not answer in {timeout:.0f} s")
            end = capture.feed(chunk)
        code = int(end) if end.strip().lstrip(b"-").isdigit() else -1
        output, truncated = capture.text()
        return ExecResult(output, code, timed_out=code in (124, 137), truncated=truncated,
                          n_bytes=capture.total, duration=time.monotonic() - start)

    def close(self) -> None:
        self.closed = True
        try:
            self.sock.close()
        except OSError:
            pass
