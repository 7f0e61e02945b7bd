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
from typing import Any

from repogym.envs.sandbox.base import ExecResult, SandboxLost
from repogym.envs.sandbox.client import engine_errors
from repogym.envs.sandbox.shell import MarkerCapture
from repogym.envs.sandbox.transport import FrameReader

READY = b"__RG_RUNNER_READY\n"
# The script travels in a variable, read by a builtin (bytes, whatever the locale), and input
# reaches a file only when there is some (staging, before any of the agent's code ran here): a
# script sent after the tests needs no free space in folders the tests could have filled, and
# reading it forks nothing.
#
# A request may first end every process of one user (the tests' user, before the results are
# read). That must work when the tests' processes took every process slot the container has (a
# fork bomb), so it forks nothing: builtins only. `kill -STOP -1` holds every process but init
# and the runner at once (a process forking then stops in its child too), the user's processes
# die while none can fork, and the rest go on; passes repeat until init reaped the last one.
# Root needs CAP_KILL for it, as grading containers have.
LOOP = r"""
end_user() {
  local i p k v left
  for ((i = 0; i < 200; i++)); do
    left=0
    kill -STOP -1 2>/dev/null
    for p in /proc/[0-9]*; do
      while read -r k v _; do
        [ "$k" = Uid: ] || continue
        if [ "$v" = "$1" ]; then kill -KILL "${p#/proc/}" 2>/dev/null; left=1; fi
        break
      done 2>/dev/null < "$p/status"
    done
    kill -CONT -1 2>/dev/null
    [ "$left" = 0 ] && return
  done
}
d=$(mktemp -d) || exit 1
printf '__RG_RUNNER_READY\n'
while IFS=' ' read -r n s b t u; do
  if [ -n "$u" ]; then end_user "$u"; fi
  LC_ALL=C IFS= read -r -N "$s" script || [ "$s" = 0 ] || exit 1
  in=/dev/null
  if [ "$b" != 0 ]; then in=$d/in; head -c "$b" > "$in" || exit 1; fi
  timeout -k 5 "$t" bash -c "$script" repogym-runner < "$in" 2>&1
  printf '\n__RG_DONE_%s %d\n' "$n" $?
done
"""


class Runner:
    """The host's end of one runner."""

    def __init__(self, sock: socket.socket, name: str):
        self.sock = sock
        self.reader = FrameReader(sock)
        self.name = name
        self.closed = False
        self.pending = b""  # what came before the ready line was seen

    @classmethod
    def start(cls, box: Any, user: str = "root") -> Runner:
        """Starts a runner in ``box``'s container; it answers once its folder exists."""
        api = box.client.api
        with engine_errors(f"start a runner in {box.name}"):
            exec_id = api.exec_create(box.container.id, ["bash", "--noprofile", "--norc", "-c",
                                                         LOOP],
                                      stdin=True, stdout=True, stderr=True, user=user,
                                      workdir=box.workdir)["Id"]
            raw = api.exec_start(exec_id, socket=True)
        sock: socket.socket = getattr(raw, "_sock", raw)
        sock.setblocking(True)
        return cls(sock, box.name)

    def _read(self, deadline: float) -> bytes:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([self.sock], [], [], left)[0]:
            return b""
        if not self.reader.fill():
            self.close()
            raise SandboxLost(f"the runner in {self.name} stopped (the container is gone?)")
        return self.reader.take()

    def run(self, script: str, data: bytes = b"", timeout: float = 120.0,
            limit: int = 64 * 1024 * 1024, end_user: int | None = None) -> ExecResult:
        """Runs ``script`` with bash, ``data`` on its stdin; its time limit is the container's
        ``timeout``, as with ``DockerSandbox.exec``. With ``end_user`` (a uid), every process of
        that user is killed first, even when they hold all the container's process slots."""
        if self.closed:
            raise SandboxLost(f"the runner in {self.name} was closed")
        start = time.monotonic()
        deadline = start + timeout + 30  # past the limit (and `timeout -k 5`): the runner is lost
        while not self.pending.endswith(READY):
            chunk = self._read(deadline)
            if not chunk:
                self.close()
                raise SandboxLost(f"the runner in {self.name} did not start")
            self.pending += chunk
        nonce = secrets.token_hex(8)
        body = script.encode("utf-8", errors="surrogateescape")
        user = "" if end_user is None else f" {int(end_user)}"
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
