"""A container's files and shell, taken and put back: what an episode's snapshot needs.

Files: as root, one program in the container compares every writable path with the pristine
copy the image carries (paths that start empty, such as ``/tmp``, with nothing) and streams a
tar of what differs (content, type, permission bits, owner, link target; deletions too) to a
file on the host. To restore, a container whose paths were just reset in place (and verified
identical to the pristine copy) takes that tar back, and the same comparison run again must
give the same digest. Both cost what a verified in-place reset costs: one ``docker exec`` and a
walk over the writable paths, never a ``docker commit`` of the container.

Shell: the working folder and the exported variables, read through the agent's own shell and
set again through the new one (each command's state is saved the usual way, so the shell
itself keeps them). Processes are not carried over: nothing of the agent runs between steps
anyway (every command's processes end with it).
"""

from __future__ import annotations

import hashlib
import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repogym.errors import SandboxError
from repogym.sandbox.client import engine_errors
from repogym.sandbox.docker import DockerSandbox
from repogym.sandbox.pristine import sources
from repogym.sandbox.snapshot_script import SCRIPT
from repogym.sandbox.transport import exec_with_input, exit_code

# Emptied by the in-place reset, so their whole content is the episode's.
EMPTIED = ("/tmp", "/var/tmp", "/dev/shm")
# The shell's own files in /tmp: a new shell makes its own.
SHELL_FILES = r"^\.repogym-(state|fifo)-[0-9]+$|^\.repogym-diff-index$"
# A root-owned Python 3 the image carries (the agent cannot write there).
PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3", "/opt/conda/bin/python3",
           "/opt/miniconda3/bin/python3")
NO_PYTHON = 127
LIMIT = 2 << 30  # bytes of snapshot; the writable mounts hold less

# builtins only: the agent's PATH and functions play no part. The shell's saving of the
# state after a command is turned off: reading the state must not change it (a `cd` back to
# the same folder sets OLDPWD).
STATE_COMMAND = (r"""trap - EXIT; printf 'cd -- %q\n' "$PWD"; for __rg_v in $(compgen -e); """
                 r"""do printf 'export %s=%q\n' "$__rg_v" "${!__rg_v}"; done""")


@dataclass(frozen=True)
class FilesTaken:
    """What :func:`capture_files` wrote: the tar on the host and the container-side digest."""

    path: str
    digest: str  # of the difference from the pristine copy, as the container computed it
    sha256: str  # of the tar file
    size: int
    entries: int
    deleted: int


def spec(box: DockerSandbox) -> dict[str, Any]:
    """The paths a snapshot covers, each with its pristine copy (or none: it starts empty)."""
    targets: list[list[str | None]] = [[path, src, None]
                                       for path, src in sources(box.workdir, box.user).items()]
    for path in EMPTIED:
        targets.append([path, None, SHELL_FILES if path == "/tmp" else None])
    return {"targets": targets}


def _argv(mode: str, box: DockerSandbox) -> list[str]:
    pythons = " ".join(PYTHONS)
    finder = (f'for p in {pythons}; do [ -x "$p" ] && exec "$p" -I -S -B -c "$0" "$@"; done; '
              f'echo "no Python 3 in {box.config.image} at {pythons}" >&2; exit {NO_PYTHON}')
    return ["sh", "-c", finder, SCRIPT, mode, json.dumps(spec(box))]


def capture_files(box: DockerSandbox, dest: Path, timeout: float = 300.0) -> FilesTaken:
    """Streams the difference from the pristine copy into ``dest`` (a tar file)."""
    api = box.client.api
    sha, size, errors = hashlib.sha256(), 0, bytearray()
    dest.parent.mkdir(parents=True, exist_ok=True)
    argv = ["timeout", "-k", "5", str(int(timeout)), *_argv("capture", box)]
    with engine_errors(f"snapshot {box.name}"), dest.open("wb") as out:
        exec_id = api.exec_create(box.container.id, argv, stdout=True, stderr=True,
                                  user="root")["Id"]
        for stdout, stderr in api.exec_start(exec_id, stream=True, demux=True):
            if stdout:
                size += len(stdout)
                if size > LIMIT:
                    raise SandboxError(f"the snapshot of {box.name} exceeds {LIMIT >> 20} MiB")
                sha.update(stdout)
                out.write(stdout)
            if stderr:
                errors += stderr[-4000:]
        code = exit_code(api, exec_id, f"the snapshot of {box.name}")
    if code != 0:
        dest.unlink(missing_ok=True)
        raise SandboxError(f"could not snapshot {box.name} (exit {code}): "
                           f"{errors.decode(errors='replace')[-500:]}")
    manifest = read_manifest(dest)
    return FilesTaken(str(dest), manifest["digest"], sha.hexdigest(), size,
                      int(manifest["entries"]), len(manifest["deleted"]))


def read_manifest(path: Path) -> dict[str, Any]:
    import tarfile

    with tarfile.open(path, mode="r|") as tar:
        first = tar.next()
        reader = tar.extractfile(first) if first is not None else None
        if first is None or first.name != "manifest.json" or reader is None:
            raise SandboxError(f"{path} is not a repogym snapshot (no manifest)")
        return dict(json.loads(reader.read()))


def restore_files(box: DockerSandbox, taken: FilesTaken, timeout: float = 300.0) -> None:
    """Puts the files back into ``box`` (just reset to the pristine copy) and verifies them."""
    data = Path(taken.path).read_bytes()
    if hashlib.sha256(data).hexdigest() != taken.sha256:
        raise SandboxError(f"{taken.path} changed since the snapshot was taken")
    argv = ["timeout", "-k", "5", str(int(timeout)), *_argv("restore", box)]
    code, out = exec_with_input(box.client.api, box.container.id, argv, data, user="root",
                                timeout=timeout + 10)
    text = out.decode(errors="replace")
    if code != 0 or f"RESTORE_OK {taken.digest}" not in text:
        raise SandboxError(f"the snapshot could not be restored in {box.name} (exit {code}): "
                           f"{text.strip()[-500:]}")


def files_digest(box: DockerSandbox) -> str:
    """The digest of how ``box``'s files differ from the pristine copy (for tests and checks)."""
    result = box.exec(_argv("digest", box), user="root", timeout=300)
    if result.exit_code != 0 or not result.output.startswith("DIGEST "):
        raise SandboxError(f"could not read the files of {box.name}: {result.output[-300:]}")
    return result.output.split()[1]


def shell_state(box: DockerSandbox) -> str:
    """The shell's working folder and exported variables, as lines the shell can run."""
    result = box.run_quiet(STATE_COMMAND)
    if result.exit_code != 0 or not result.output.startswith("cd -- "):
        raise SandboxError(f"could not read the shell's state in {box.name}: "
                           f"{result.output[-300:]}")
    return result.output


def restore_shell(box: DockerSandbox, state: str) -> None:
    """Sets the working folder and exported variables of ``box``'s shell, then checks them."""
    if not state.startswith("cd -- "):
        raise SandboxError(f"not a shell state: {state[:80]!r}")
    lines = state.splitlines()
    if not all(line.startswith("export ") for line in lines[1:]):
        raise SandboxError(f"not a shell state: {state[:80]!r}")
    # The command writes the shell's state file itself (its usual saving is turned off), and
    # the shell sources it at the top level: the folder first (absolute: CDPATH plays no
    # part), then every exported variable unset, so that one the state lacks is gone (OLDPWD
    # after a `cd`), then the state's variables.
    body = [lines[0], 'for __rg_v in $(compgen -e); do unset -v "$__rg_v"; done; '
                      "unset -v __rg_v", *lines[1:]]
    command = ("trap - EXIT; printf '%s\\n' " + " ".join(shlex.quote(x) for x in body)
               + ' > "$__rg_state"')
    result = box.run_quiet(command)
    if result.exit_code != 0:
        raise SandboxError(f"could not restore the shell's state in {box.name}: "
                           f"{result.output[-300:]}")
    now = shell_state(box)
    if now != state:
        raise SandboxError(f"the shell of {box.name} differs after the restore: "
                           f"{_first_difference(state, now)}")


def _first_difference(a: str, b: str) -> str:
    for x, y in zip(a.splitlines(), b.splitlines(), strict=False):
        if x != y:
            return f"{shlex.quote(x[:80])} != {shlex.quote(y[:80])}"
    return "one has more lines"
