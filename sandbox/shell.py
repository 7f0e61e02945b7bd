"""One persistent bash per sandbox, spoken to over a byte stream.

Each command runs in a subshell that is its own process group (``set -m``), so a timeout kills
the whole tree while the shell survives; ``cd`` and exports are carried back to the shell
through a state file written when the subshell exits. The end of a command is a line with a
fresh nonce, its exit code, whether its time ran out and the working folder. The host keeps
only the head and the tail of the output, so a command that prints gigabytes costs bounded
memory.
"""

from __future__ import annotations

import re
import secrets
import time
from typing import Protocol

from repogym.resources import script
from repogym.sandbox.base import ExecResult

# Sent once when the shell starts (what it defines, and why, is in the file); it reads
# whether to end the user's stray processes from $1.
PRELUDE = script("repogym.sandbox", "shell_prelude.sh", bare=True)

COMMAND = r"""__rg_run {seconds} {micros} {save} {program} <<'__RG_EOF_{nonce}'
{command}
__RG_EOF_{nonce}
{load}__rg_fin {nonce}
"""

# After a command that saved its state: read it back at the top level.
LOAD_STATE = """[ -s "$__rg_state" ] && { . "$__rg_state"; : > "$__rg_state"; } 2>/dev/null\n"""


# What a command needs to change the directory or the exported variables of the shell: a
# builtin that does, an assignment, or anything that could build one (expansions, globs,
# braces, quotes, escapes). A command with none of these runs programs only, and saving the
# state after it (`export -p` into a file, a millisecond and more) is skipped.
_STATE_CHANGE = re.compile(
    r"""[$`\\'"={?*[]|(?:^|[\s;&|(){}])(?:cd|pushd|popd|export|unset|declare|typeset|source|set"""
    r"""|eval|alias|readonly|local|shopt|umask|builtin|command|exec|enable|trap|read|mapfile"""
    r"""|readarray|printf|let|getopts|for|select|\.)"""
    r"""(?=$|[\s;&|(){}])""")


def may_change_state(command: str) -> bool:
    """Whether ``command`` might change the shell's directory or exported variables."""
    return bool(_STATE_CHANGE.search(command))


# One program with plain words for arguments: no operators, redirections, quoting or expansions.
# Unless its name is a builtin or a keyword, the command's subshell can become the program
# (`exec`), one fork fewer.
_ONE_PROGRAM = re.compile(r"[A-Za-z0-9_.+-]+(?:[ \t]+[A-Za-z0-9_.,:@%+/=~^-]+)*[ \t]*")
_NOT_PROGRAMS = frozenset("""
    . : [ [[ ]] ! { } alias bg bind break builtin caller case cd command compgen complete compopt
    continue coproc declare dirs disown do done echo elif else enable esac eval exec exit export
    false fc fg fi for function getopts hash help history if in jobs kill let local logout
    mapfile popd printf pushd pwd read readarray readonly return select set shift shopt source
    suspend test then time times trap true type typeset ulimit umask unalias unset until wait
    while""".split())


def runs_one_program(command: str) -> bool:
    """Whether ``command`` is one program with plain arguments, so it may replace its subshell."""
    return (_ONE_PROGRAM.fullmatch(command) is not None
            and command.split(maxsplit=1)[0] not in _NOT_PROGRAMS)


class Transport(Protocol):
    """A byte stream to a shell, and a way to signal it."""

    def send(self, data: bytes) -> None: ...

    def recv(self, timeout: float) -> bytes | None:
        """Bytes read, ``b""`` at end of stream, ``None`` when nothing came within ``timeout``."""
        ...

    def interrupt(self, shell_pid: int) -> None:
        """Sends SIGUSR1 to the shell, which kills the running command's process group."""
        ...

    def close(self) -> None: ...


class ShellDied(Exception):
    """The shell's stream ended: it was killed or the container stopped."""


class OutputCapture:
    """Keeps the first and last ``limit // 2`` bytes of a stream and counts the rest."""

    def __init__(self, limit: int):
        self.limit = limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        half = self.limit // 2
        room = half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > half:
                del self.tail[: len(self.tail) - half]

    def text(self) -> tuple[str, bool]:
        body = bytes(self.head)
        cut = self.total - len(self.head) - len(self.tail)
        if cut > 0:
            body += f"\n[... {cut} bytes of output cut; showing head and tail ...]\n".encode()
        body += bytes(self.tail)
        return body.decode("utf-8", errors="replace"), cut > 0


class MarkerCapture(OutputCapture):
    """An :class:`OutputCapture` that also finds the end marker across chunk borders."""

    def __init__(self, limit: int, marker: bytes):
        super().__init__(limit)
        self.marker = marker
        self.pending = b""

    def feed(self, chunk: bytes) -> bytes | None:
        """Takes a chunk; returns the end line once the marker has been seen."""
        data = self.pending + chunk
        at = data.find(self.marker)
        if at >= 0:
            end = data.find(b"\n", at + len(self.marker))
            if end < 0:
                self.pending = data
                return None
            self.add(data[:at])
            self.pending = b""
            return data[at + len(self.marker) : end]
        keep = max(0, len(data) - len(self.marker))
        self.add(data[:keep])
        self.pending = data[keep:]
        return None


class Shell:
    """The host side of the protocol.

    ``reap_strays`` ends every other process of the shell's user after each command; only for
    a shell alone in its container (never on the host, where it would end the user's session).
    """

    # after the time limit the shell's timer should answer at once; the host waits this much
    # longer before signalling from outside, then gives the shell up
    GRACE = 5.0
    GIVE_UP = 10.0

    def __init__(self, transport: Transport, output_limit: int, start_timeout: float = 30.0,
                 reap_strays: bool = False):
        self.transport = transport
        self.output_limit = output_limit
        self.reap_strays = reap_strays
        self.pid = self._handshake(start_timeout) if start_timeout > 0 else 0
        self.cwd: str | None = None

    @classmethod
    def adopt(cls, transport: Transport, output_limit: int, pid: int, cwd: str | None,
              reap_strays: bool = False) -> Shell:
        """A shell that another process started (and did the handshake with), taken over with
        its stream: the two never speak to it at the same time."""
        shell = cls(transport, output_limit, start_timeout=0, reap_strays=reap_strays)
        shell.pid, shell.cwd = pid, cwd
        return shell

    def _handshake(self, timeout: float) -> int:
        self.transport.send(f"set -- {int(self.reap_strays)}\n{PRELUDE}".encode())
        buf = b""
        deadline = time.monotonic() + timeout
        while (m := re.search(rb"__RG_READY (\d+)\n", buf)) is None:
            left = deadline - time.monotonic()
            chunk = self.transport.recv(max(0.0, min(left, 1.0)))
            if chunk == b"" or left <= 0:
                raise ShellDied(f"the shell did not start; it said: {buf[-500:]!r}")
            buf += chunk or b""
        return int(m.group(1))

    def run(self, command: str, timeout: float) -> ExecResult:
        nonce = secrets.token_hex(8)
        marker = f"\n__RG_END_{nonce} ".encode()
        command = command.replace("\x00", "")
        save = may_change_state(command)
        seconds = max(timeout, 0.001)
        script = COMMAND.format(nonce=nonce, command=command, save=int(save),
                                program=int(not save and runs_one_program(command)),
                                seconds=f"{seconds:.3f}", micros=round(seconds * 1e6),
                                load=LOAD_STATE if save else "")
        start = time.monotonic()
        self.transport.send(script.encode("utf-8", errors="surrogateescape"))
        end = self._read_until(MarkerCapture(self.output_limit, marker), start + timeout)
        return self._result(end, start)

    def _read_until(self, cap: MarkerCapture, deadline: float) -> tuple[bytes, MarkerCapture, bool]:
        """Output up to the end marker; signals from outside if the timer did not act."""
        interrupted = False
        while True:
            chunk = self.transport.recv(1.0)
            if chunk == b"":
                raise ShellDied("the shell's stream ended")
            if chunk:
                end = cap.feed(chunk)
                if end is not None:
                    return end, cap, interrupted
            late = time.monotonic() - deadline
            if late > self.GRACE and not interrupted:
                interrupted = True
                self.transport.interrupt(self.pid)
            elif late > self.GRACE + self.GIVE_UP:
                raise ShellDied("the shell did not answer after its command was killed")

    def _result(self, ended: tuple[bytes, MarkerCapture, bool], start: float) -> ExecResult:
        end, cap, interrupted = ended
        code_text, timed_text, cwd = (end.decode("utf-8", errors="replace").split(" ", 2)
                                      + ["", ""])[:3]
        self.cwd = cwd or self.cwd
        output, truncated = cap.text()
        return ExecResult(
            output=output,
            exit_code=int(code_text) if code_text.lstrip("-").isdigit() else -1,
            timed_out=timed_text == "1" or interrupted,
            truncated=truncated,
            n_bytes=cap.total,
            duration=time.monotonic() - start,
        )

    def close(self) -> None:
        self.transport.close()
