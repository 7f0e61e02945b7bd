"""File access for the editing tools, all of it through the sandbox.

Contents move through ``Sandbox.read_file``/``write_file``; what those cannot say (is it a
folder, how big is it) is asked of the sandbox's shell. The shell commands never ``cd`` or
export anything, because the persistent shell carries both back into the agent's session.
"""

from __future__ import annotations

import posixpath
import shlex
from dataclasses import dataclass

from repogym.envs.tools_schemas import CallError
from repogym.errors import SandboxError
from repogym.sandbox.base import Sandbox

PROBE_TIMEOUT = 30.0
_KIND = "__RG_KIND"


@dataclass(frozen=True)
class PathInfo:
    """What is at a path: ``kind`` is file, dir, other (device, dangling link...) or missing."""

    path: str
    kind: str
    size: int | None = None


def resolve(workdir: str, path: str) -> str:
    """``path`` made absolute inside the sandbox; relative paths start at the repository root."""
    if not path.strip():
        raise CallError("'path' is empty; give a file path such as src/app.py.")
    if "\x00" in path:
        raise CallError("'path' contains a NUL character.")
    return posixpath.normpath(posixpath.join(workdir, path))


def shown_path(path: str) -> str:
    """A path safe to print: bytes that are not UTF-8 appear as escapes such as ``\\udce9``,
    which is also how to write that name back in a JSON string."""
    return path.encode("utf-8", errors="backslashreplace").decode("utf-8")


def printable(text: str) -> str:
    """``text`` with undecodable bytes shown as U+FFFD, so the observation is valid Unicode."""
    try:
        return text.encode("utf-8", errors="surrogateescape").decode("utf-8", errors="replace")
    except UnicodeEncodeError:
        return text.encode("utf-8", errors="replace").decode("utf-8")


def decode(data: bytes) -> str:
    # surrogateescape keeps bytes that are not UTF-8, so an edit writes them back unchanged.
    return data.decode("utf-8", errors="surrogateescape")


def encode(text: str, what: str) -> bytes:
    try:
        return text.encode("utf-8", errors="surrogateescape")
    except UnicodeEncodeError as exc:
        raise CallError(
            f"{what} contains a character that cannot be written as UTF-8: {exc}."
        ) from None


def probe(sandbox: Sandbox, path: str) -> PathInfo:
    """What is at ``path``, asked of the sandbox's shell (retried once if the shell restarts)."""
    q = shlex.quote(path)
    command = (
        f"if [ -d {q} ]; then echo {_KIND} dir; "
        f"elif [ -f {q} ]; then echo {_KIND} file $(command -p wc -c < {q} 2>/dev/null); "
        f"elif [ -e {q} ] || [ -L {q} ]; then echo {_KIND} other; "
        f"else echo {_KIND} missing; fi"
    )
    output = ""
    for _ in range(2):
        result = sandbox.run(command, timeout=PROBE_TIMEOUT)
        output = result.output
        for line in reversed(output.splitlines()):
            if line.startswith(_KIND + " "):
                return _path_info(path, line.split()[1:])
    raise SandboxError(f"could not inspect {shown_path(path)} in the sandbox; it said: {output!r}")


def _path_info(path: str, fields: list[str]) -> PathInfo:
    size = int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else None
    return PathInfo(path, fields[0], size)


def read_bytes(sandbox: Sandbox, path: str) -> bytes:
    try:
        return sandbox.read_file(path)
    except (OSError, SandboxError) as exc:
        error = _as_call_error(exc, path, "read")
        if error is None:
            raise
        raise error from exc


def write_bytes(sandbox: Sandbox, path: str, data: bytes) -> None:
    try:
        sandbox.write_file(path, data)
    except (OSError, SandboxError) as exc:
        error = _as_call_error(exc, path, "write")
        if error is None:
            raise
        raise error from exc


def make_parents(sandbox: Sandbox, path: str) -> None:
    parent = posixpath.dirname(path)
    result = sandbox.run(f"command -p mkdir -p -- {shlex.quote(parent)}", PROBE_TIMEOUT)
    if result.exit_code != 0:
        raise CallError(
            f"could not create the folder {shown_path(parent)}: {printable(result.output).strip()}"
        )


def remove(sandbox: Sandbox, path: str) -> None:
    result = sandbox.run(f"command -p rm -f -- {shlex.quote(path)}", PROBE_TIMEOUT)
    if result.exit_code != 0:
        raise CallError(f"could not remove {shown_path(path)}: {printable(result.output).strip()}")


# Phrases by which a sandbox reports, in a SandboxError, a problem with the path itself.
_PATH_PROBLEMS = {
    "no such file": "does not exist",
    "could not find the file": "does not exist",
    "is a directory": "is a folder, not a file",
    "not a directory": "has a parent that is not a folder",
    "permission denied": "cannot be accessed: permission denied",
    "read-only file system": "is on a read-only file system",
    "file name too long": "has a name that is too long",
    "no space left on device": "is on a full disk (no space left on device)",
    "is larger than": "is too large for the file tools; read a range with bash (sed -n)",
}


def _as_call_error(exc: OSError | SandboxError, path: str, verb: str) -> CallError | None:
    """The agent-facing error for a failed read or write; None when the failure is the
    sandbox's own, which must propagate."""
    where = shown_path(path)
    if isinstance(exc, FileNotFoundError):
        return CallError(f"{where} does not exist.")
    if isinstance(exc, IsADirectoryError):
        return CallError(f"{where} is a folder, not a file.")
    if isinstance(exc, NotADirectoryError):
        return CallError(f"{where} has a parent that is not a folder.")
    if isinstance(exc, PermissionError):
        return CallError(f"cannot {verb} {where}: permission denied.")
    message = str(exc).lower()
    for phrase, meaning in _PATH_PROBLEMS.items():
        if phrase in message:
            return CallError(f"cannot {verb} {where}: it {meaning}.")
    return None
