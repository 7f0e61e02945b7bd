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

from repogym.envs.sandbox.base import ExecResult

# Sent once when the shell starts; it defines the functions every command calls, so that each
# command sends little more than itself (bash reads a pipe one byte at a time). stdin carries the
# protocol, so commands get </dev/null.
#
# Time limits: a timer process, started once and restarted only when gone, is told each
# command's limit over a FIFO (fd 8) and signals the shell with USR1 when it runs out; the shell's
# trap then kills the command's process group, so a command that exhausts the process limit is
# still stopped without a new process, and no process is started per command. The trap kills only
# once the running command's own deadline has passed, so a late signal meant for an earlier
# command, or one sent by a command, stops nothing. fd 9 is a FIFO that nothing ever writes to: a
# `read -t` on it is a sleep that needs no process. The timer polls for the shell once a second
# while idle, so it does not outlive a shell that was killed.
PRELUDE = r"""
exec 2>&1
set +o history
__rg_state="${TMPDIR:-/tmp}/.repogym-state-$$"
: > "$__rg_state"
__rg_save() { local f=$__rg_state v; for v in "${!__rg_@}"; do unset -v "$v"; done 2>/dev/null
  { printf 'cd -- %q\n' "$PWD"; export -p; } > "$f" 2>/dev/null; }
__rg_pid=
__rg_to=0
__rg_end=0
__rg_tpid=
__rg_now() { __rg_t=${EPOCHREALTIME//[!0-9]/}; }
trap '[ -n "$__rg_pid" ] && __rg_now && [ $__rg_t -ge $__rg_end ] \
  && { __rg_to=1; kill -KILL -- -$__rg_pid; } 2>/dev/null' USR1
trap '[ -n "$__rg_tpid" ] && kill -KILL $__rg_tpid 2>/dev/null' EXIT
{ __rg_fifo="${TMPDIR:-/tmp}/.repogym-fifo-$$"
  for __rg_fd in 8 9; do command rm -f -- "$__rg_fifo"
    command mkfifo -m 600 -- "$__rg_fifo" && eval "exec $__rg_fd<>\"\$__rg_fifo\""; done
  command rm -f -- "$__rg_fifo"; } 2>/dev/null
__rg_timer() { local t= r; trap - USR1 EXIT
  while :; do
    if [ -n "$t" ]; then read -r -t "$t" -u 8 t; r=$?; [ $r -gt 128 ] && { kill -USR1 $$ || exit; }
    else read -r -t 1 -u 8 t; r=$?; [ $r -gt 128 ] && { kill -0 $$ || exit; }; fi
    [ $r -gt 128 ] && t=; [ $r != 0 ] && [ $r -le 128 ] && exit
  done; }
# Whether a process of this user other than the shell and its timer is left; builtins only, no
# fork. (`kill -0 -1` cannot tell: it succeeds while any process at all is visible.)
__rg_left() { local d; for d in /proc/[0-9]*; do d=${d#/proc/}
  [ $d != $$ ] && [ "$d" != "$__rg_tpid" ] && [ -O /proc/$d ] && return 0; done; return 1; }
__rg_reap={reap}
[ "$EUID" = 0 ] && __rg_reap=0
# One command, read from stdin; $1 is its time limit in seconds, $2 the same in microseconds,
# $3 whether to save its state, $4 whether it is one program (see runs_one_program). When the
# shell runs unprivileged and a process of its user outlives the command, `kill -KILL -1` ends
# every other process of that user (kill(-1) spares the caller), timer included: nothing a
# command started outlives it, not even what left the process group (setsid, nohup, a second
# job-control shell). It repeats until no process of the user is left, zombies included (for at
# most about 3 s): a fork bomb's orphans hold process slots until the container's init reaps
# them, and the next command needs free slots to start. The state file is read back at the top
# level: sourced in a function, `export -p`'s `declare -x` lines would make locals.
__rg_run() {
IFS= read -r -d '' __rg_cmd; __rg_cmd=${__rg_cmd%$'\n'}
__rg_pid=
__rg_to=0
__rg_now; __rg_end=$((__rg_t + $2))
kill -0 "$__rg_tpid" 2>/dev/null || { __rg_timer </dev/null >/dev/null 2>&1 9>&- & __rg_tpid=$!; }
printf '%s\n' "$1" >&8 2>/dev/null
set -m
( [ "$3" = 1 ] && trap __rg_save EXIT
  [ "$4" = 1 ] && hash -- "${__rg_cmd%% *}" 2>/dev/null && __rg_cmd="exec $__rg_cmd"
  set --; eval "$__rg_cmd" ) </dev/null 8>&- 9>&- &
__rg_pid=$!
set +m
{ wait $__rg_pid; __rg_rc=$?
while kill -0 $__rg_pid; do wait $__rg_pid; __rg_rc=$?; done
echo >&8
kill -KILL -- -$__rg_pid
[ $__rg_reap = 1 ] && __rg_left && { kill -KILL -1; wait; __rg_tpid=; __rg_n=0
while __rg_left && [ $((__rg_n+=1)) -lt 300 ]; do kill -KILL -1; read -r -t 0.01 -u 9; done; }
} 2>/dev/null
__rg_pid=
}
__rg_fin() { printf '\n__RG_END_%s %d %d %s\n' "$1" "$__rg_rc" "$__rg_to" "$PWD"; }
printf '__RG_READY %d\n' "$$"
"""

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
        self.transport.send(PRELUDE.replace("{reap}", str(int(self.reap_strays))).encode())
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
