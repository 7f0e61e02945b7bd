"""The daemonless sandbox: bubblewrap over an image exported as a root file system.

No engine, no daemon and no root: ``bwrap`` (Debian's ``bubblewrap``) makes a user namespace
with the one id the running user has, and in it a mount, process, network, IPC and host-name
namespace of the sandbox's own. The image's tree (:mod:`repogym.sandbox.trees`) is the
root, read-only; the writable paths are size-limited tmpfs filled from the image's pristine
copy; the network is gone; no capability is left to the sandbox's processes and none can be
gained (``no_new_privs``, and no user namespace inside: ``--disable-userns``). Process and
memory limits are the kernel's ``RLIMIT_NPROC`` (counted in the sandbox's own user namespace)
and ``RLIMIT_DATA``; nothing limits CPU. When repogym runs as root, the sandboxes run as
``REPOGYM_SANDBOX_USER`` instead, exactly as they would for that user without root.

A sandbox's first process is its main one (the agent's shell, or the grader's root runner),
spoken to over a socket pair. Other processes enter the sandbox with ``nsenter``: as the
sandbox's root (the one id, with capabilities inside only), or, for code under test, in a
process namespace and a mount namespace of their own without any capability, so that ending
them all is killing that namespace's first process. The one id is what is lost against
Docker: the agent's user and the sandbox's root are the same user to the kernel, separated by
namespaces and capabilities, not by ids (docs/backends.md says what that costs).
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import select
import shlex
import shutil
import signal
import socket
import subprocess
import tarfile
import time
import uuid

from repogym.errors import SandboxError
from repogym.sandbox.base import ExecResult, SandboxConfig, SandboxLost, parse_size
from repogym.sandbox.pristine import fill_script, sources
from repogym.sandbox.root_runner import LOOP, Runner
from repogym.sandbox.shell import OutputCapture, Shell, ShellDied
from repogym.sandbox.shell_files import ShellFiles
from repogym.sandbox.transport import RawReader
from repogym.sandbox.trees import Tree, sandbox_user
from repogym.sandbox.util import restart_note

NS_GET_PARENT = 0xB702  # ioctl: the parent of a user namespace (linux/nsfs.h)
AGENT_UID = 1000  # the images' unprivileged user, as in Docker
KILL_WAIT = 10.0  # seconds a killed process namespace may take to empty


def as_user() -> list[str]:
    """The argv prefix that drops root to the sandbox user (nothing when not root)."""
    user = sandbox_user()
    if user is None:
        return []
    return ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups",
            "--"]


def check_bwrap() -> str:
    """bubblewrap's version line; raises :class:`SandboxError` naming the fix when it is
    missing or this kernel lets no unprivileged user make a user namespace."""
    if shutil.which("bwrap") is None:
        raise SandboxError("bubblewrap is not installed: `apt-get install -y bubblewrap` (or "
                           "`make podman` as root), or use --backend docker / podman")
    probe = subprocess.run([*as_user(), "bwrap", "--unshare-all", "--unshare-user",
                            "--ro-bind", "/", "/", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        raise SandboxError(
            "bubblewrap cannot make a user namespace here "
            f"({probe.stderr.strip()[:200]}): the kernel must allow unprivileged user "
            "namespaces (sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces "
            "> 0), or use another backend")
    return subprocess.run(["bwrap", "--version"], capture_output=True,
                          text=True).stdout.strip()


class BwrapContainer:
    """One bubblewrap sandbox of ``tree`` and its processes (see the module's docstring).

    ``main`` is the first process's shell script; it runs as ``uid`` (0: the sandbox's root,
    with its capabilities; else without any), its stdin and stdout one end of ``self.sock``.
    """

    def __init__(self, tree: Tree, config: SandboxConfig, main: str, uid: int,
                 home: str = "/tmp"):
        self.tree, self.config = tree, config
        self.name = f"repogym-{config.run_id}-{uuid.uuid4().hex[:8]}"
        self.env = {**dict(tree.env), "HOME": home, **dict(config.env)}
        self.sock, theirs = socket.socketpair()
        info_r, info_w = os.pipe()
        self._tests: list[subprocess.Popen[bytes]] = []
        self._userns: int | None = None
        try:
            self.proc = subprocess.Popen(
                [*as_user(), "bwrap", *self._options(uid, info_w), "--", "bash",
                 "--noprofile", "--norc", "-c", main],
                stdin=theirs.fileno(), stdout=theirs.fileno(), stderr=subprocess.STDOUT,
                pass_fds=(info_w,),
                start_new_session=True)
        finally:
            theirs.close()
            os.close(info_w)
        try:
            self.pid = self._child_pid(info_r)
        except BaseException:
            self.kill()
            raise
        finally:
            os.close(info_r)

    def _options(self, uid: int, info_fd: int) -> list[str]:
        cfg = self.config
        for path, _ in cfg.writable:  # a mount point the image lacks (Docker makes its own)
            (self.tree.root / path.lstrip("/")).mkdir(parents=True, exist_ok=True)
        # the main process is the namespace's first: nothing inside can signal it without its
        # own handler, so an agent that kills every process it can leaves its shell alone
        options = ["--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
                   "--new-session", "--as-pid-1", "--uid", str(uid), "--gid", str(uid),
                   "--ro-bind", str(self.tree.root), "/", "--proc", "/proc", "--dev", "/dev",
                   "--perms", "1777", "--size", str(parse_size(cfg.tmpfs_size)), "--tmpfs",
                   "/tmp"]
        for path, size in cfg.writable:
            mode = "1777" if path.rstrip("/").endswith("tmp") else "0755"
            options += ["--perms", mode, "--size", str(parse_size(size)), "--tmpfs", path]
        options += ["--chdir", cfg.workdir, "--hostname", "repogym", "--clearenv"]
        for key, value in self.env.items():
            options += ["--setenv", key, value]
        if uid == 0:
            options += ["--cap-add", "ALL"]  # the sandbox's root: in its namespaces only
        return [*options, "--info-fd", str(info_fd)]

    def _child_pid(self, info_r: int) -> int:
        """The host pid of the sandbox's first process, from bwrap's report."""
        data = b""
        deadline = time.monotonic() + 60
        while b"}" not in data:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([info_r], [], [], left)[0]:
                break
            chunk = os.read(info_r, 4096)
            if not chunk:
                break
            data += chunk
        try:
            return int(json.loads(data.decode())["child-pid"])
        except (ValueError, KeyError):
            out = self._output_so_far()
            raise SandboxError(f"bubblewrap did not start {self.name}: {out[-500:]!r}"
                               ) from None

    def _output_so_far(self) -> bytes:
        self.sock.setblocking(False)
        try:
            return self.sock.recv(65536)
        except OSError:
            return b""
        finally:
            self.sock.setblocking(True)

    # --- processes entering the sandbox ----------------------------------------------------------

    def _user_namespace(self) -> int:
        """An fd of the user namespace that owns the sandbox's other namespaces: the parent
        of the first process's (bwrap nests one more to forbid new ones)."""
        if self._userns is None:
            own = os.open(f"/proc/{self.pid}/ns/user", os.O_RDONLY)
            try:
                self._userns = fcntl.ioctl(own, NS_GET_PARENT)
            finally:
                os.close(own)
        return self._userns

    def enter(self, argv: list[str], tests: bool, stdin: bytes = b"") -> subprocess.Popen[bytes]:
        """Starts ``argv`` in the sandbox: as its root, or (``tests``) as code under test in a
        process and mount namespace of its own, with no capability and the sandbox's limits."""
        userns = self._user_namespace()
        inner = list(argv)
        if tests:
            limits = (f"ulimit -S -H -u {max(self.config.pids_limit, 16)} "
                      f"-d {parse_size(self.config.memory) // 1024}")
            inner = ["unshare", "--pid", "--mount", "--fork", "--kill-child", "--mount-proc",
                     "--", "setpriv", "--inh-caps=-all", "--ambient-caps=-all",
                     "--bounding-set=-all", "--no-new-privs", "--", "bash", "-c",
                     f'{limits} && exec "$@"', "repogym-tests", *argv]
        # the running user is the sandbox's root in that namespace already: no id to set
        command = [*as_user(), "nsenter", f"--user=/proc/self/fd/{userns}", "-t", str(self.pid),
                   "--mount", "--pid", "--ipc", "--uts", "--net", "--root", "--wd",
                   "--preserve-credentials", "--",
                   "env", "-i", *(f"{k}={v}" for k, v in self.env.items()), *inner]
        proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, pass_fds=(userns,),
                                start_new_session=True)
        assert proc.stdin is not None
        try:
            proc.stdin.write(stdin)
        except BrokenPipeError:
            pass
        proc.stdin.close()
        if tests:
            self._tests.append(proc)
        return proc

    def run(self, argv: list[str], tests: bool, timeout: float, limit: int,
            stdin: bytes = b"") -> ExecResult:
        """``argv`` run to its end or its time limit; output capped, failures as data."""
        start = time.monotonic()
        wrapped = ["timeout", "-k", "5", str(max(1, int(timeout))), *argv]
        proc = self.enter(wrapped, tests, stdin)
        assert proc.stdout is not None
        capture = OutputCapture(limit)
        fd, deadline = proc.stdout.fileno(), start + timeout + 30
        while (left := deadline - time.monotonic()) > 0:
            if select.select([fd], [], [], left)[0]:
                chunk = os.read(fd, 262144)
                if not chunk:
                    break
                capture.add(chunk)
        else:
            self._kill_tree(proc.pid)
        code = proc.wait()
        proc.stdout.close()
        output, truncated = capture.text()
        return ExecResult(output, code, timed_out=code in (124, 137), truncated=truncated,
                          n_bytes=capture.total, duration=time.monotonic() - start)

    def end_tests(self) -> None:
        """Ends every process of code under test: each started in a process namespace of its
        own, killing that namespace's first process ends the rest (a fork bomb too)."""
        for proc in self._tests:
            self._kill_tree(proc.pid)
        for proc in self._tests:
            try:
                proc.wait(timeout=KILL_WAIT)
            except subprocess.TimeoutExpired as exc:
                raise SandboxLost(f"the tests in {self.name} did not end") from exc
        self._tests.clear()

    @staticmethod
    def _kill_tree(pid: int) -> None:
        """SIGKILL to ``pid``'s descendants, the deepest first, then to it."""
        def children(p: int) -> list[int]:
            try:
                with open(f"/proc/{p}/task/{p}/children") as f:
                    return [int(c) for c in f.read().split()]
            except OSError:
                return []

        order, todo = [], [pid]
        while todo:
            p = todo.pop()
            order.append(p)
            todo += children(p)
        for p in reversed(order):
            try:
                os.kill(p, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    # --- lifecycle -------------------------------------------------------------------------------

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """Ends the sandbox: its first process takes every other with it (process namespace),
        and bwrap dies with it (``--die-with-parent``)."""
        self.end_tests_quietly()
        self._kill_tree(self.proc.pid)
        try:
            self.proc.wait(timeout=KILL_WAIT)
        except subprocess.TimeoutExpired:
            pass
        self.sock.close()
        if self._userns is not None:
            os.close(self._userns)
            self._userns = None

    def end_tests_quietly(self) -> None:
        try:
            self.end_tests()
        except SandboxLost:
            pass


class SocketPairTransport:
    """The shell protocol over the sandbox's socket pair (no framing: the bytes themselves)."""

    def __init__(self, container: BwrapContainer):
        self.container = container
        self.sock = container.sock

    def send(self, data: bytes) -> None:
        try:
            self.sock.sendall(data)
        except OSError:
            pass  # the reader sees the end of the stream

    def recv(self, timeout: float) -> bytes | None:
        if not select.select([self.sock], [], [], max(0.0, timeout))[0]:
            return None
        try:
            return self.sock.recv(262144)
        except OSError:
            return b""

    def interrupt(self, shell_pid: int) -> None:
        """SIGUSR1 to the shell, by its pid on the host: the sandbox's first process."""
        try:
            os.kill(self.container.pid, signal.SIGUSR1)
        except (ProcessLookupError, PermissionError):
            pass

    def close(self) -> None:
        """The socket stays the container's until it is killed."""


class BwrapSandbox(ShellFiles):
    """An agent's sandbox: the repository at the workdir, the agent's persistent shell as the
    first process (uid 1000 as in the Docker images, no capability), files through it."""

    def __init__(self, config: SandboxConfig, tree: Tree):
        self.config, self.tree = config, tree
        self.workdir = config.workdir
        self.user = tree.user if config.user and config.user == tree.user else None
        self._closed = False
        self._shell: Shell | None = None
        self.container = self._start()
        self.name = self.container.name

    def _start(self) -> BwrapContainer:
        uid = AGENT_UID if self.user else 0
        home = f"/home/{self.user}" if self.user else "/tmp"
        targets = sources(self.workdir, self.user)
        boot = (f"{_quiet_fill(targets)}"
                f"ulimit -S -H -u {self.config.pids_limit} "
                f"-d {parse_size(self.config.memory) // 1024} || exit 8\n"
                f"cd {shlex.quote(self.workdir)} && exec bash --noprofile --norc -s")
        container = BwrapContainer(self.tree, self.config, boot, uid, home)
        try:
            self._shell = Shell(SocketPairTransport(container), self.config.output_limit,
                                reap_strays=uid != 0)
        except ShellDied as exc:
            said = exc.args[0] if exc.args else ""
            container.kill()
            raise SandboxError(f"no shell started in {container.name}: {said}") from exc
        return container

    def run(self, command: str, timeout: float = 60.0) -> ExecResult:
        if self._closed or self._shell is None:
            raise SandboxError(f"{self.name} is closed")
        try:
            return self._shell.run(command, timeout)
        except ShellDied as died:
            return self._recover(str(died))

    def _recover(self, reason: str) -> ExecResult:
        """The agent's user and the sandbox's first process are one user here: an agent can
        end its own shell, and the sandbox with it. A new sandbox starts, the repository as
        it was at the start (what a root agent gets from the Docker sandbox)."""
        self.container.kill()
        self.container = self._start()
        self.name = self.container.name
        note = restart_note(reason + "; the sandbox was started again, the repository as it "
                            "was at the start", self.workdir)
        return ExecResult(note, -1, shell_restarted=True)

    def exec(self, argv: list[str], user: str | None = None, timeout: float = 60.0,
             limit: int | None = None) -> ExecResult:
        """``argv`` outside the shell: as the sandbox's root with ``user="root"``, else as
        code under test (no capability, a process namespace of its own)."""
        return self.container.run(argv, tests=user != "root", timeout=timeout,
                                  limit=limit or self.config.output_limit)

    def put_files(self, files: dict[str, bytes], dest: str, owner: int = 0) -> None:
        """Writes files (paths relative to ``dest``) as the sandbox's root (one id: ``owner``
        cannot be another)."""
        self.container_put(self.container, files, dest)

    @staticmethod
    def container_put(container: BwrapContainer, files: dict[str, bytes], dest: str) -> None:
        result = container.run(["tar", "-x", "--no-same-owner", "-f", "-", "-C", dest],
                               tests=False, timeout=120, limit=4000, stdin=tar_of(files))
        if result.exit_code != 0:
            raise SandboxError(f"could not write files into {container.name}:{dest}: "
                               f"{result.output[-300:]}")

    def alive(self) -> bool:
        return not self._closed and self.container.alive()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._shell is not None:
            self._shell.close()
            self._shell = None
        self.container.kill()

    def __enter__(self) -> BwrapSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def tar_of(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


class BwrapRunner(Runner):
    """The root runner of a grading sandbox: the sandbox's first process runs runner.LOOP,
    spoken to as in a container. Ending the tests' user is ending the code under test's
    process namespaces here (they share the runner's one id)."""

    def __init__(self, container: BwrapContainer):
        super().__init__(container.sock, container.name, RawReader(container.sock))
        self.container = container
        try:  # the loop says it is ready only after this line (see runner_loop.sh)
            self.sock.sendall(b"\n")
        except OSError as exc:
            raise SandboxLost(f"the runner in {container.name} did not start: {exc}") from exc

    def run(self, script: str, data: bytes = b"", timeout: float = 120.0,
            limit: int = 64 * 1024 * 1024, end_user: int | None = None,
            spare: int | None = None) -> ExecResult:
        if end_user is not None:
            self.container.end_tests()
        try:
            return super().run(script, data, timeout, limit)
        except SandboxLost as exc:  # what the sandbox said before it ended, if anything
            said = (self.pending + self.reader.take()).decode(errors="replace").strip()
            raise SandboxLost(f"{exc}: {said[-500:]}" if said else str(exc)) from exc

    def close(self) -> None:
        """The socket is the container's: closed when it is killed."""
        self.closed = True


def grading_main(config: SandboxConfig, user: str | None) -> str:
    """The first process of a grading sandbox: the repository from the pristine copy, the
    limits, then the root runner's loop."""
    targets = sources(config.workdir, user)
    return (f"{_quiet_fill(targets)}"
            f"exec bash --noprofile --norc -c {shlex.quote(LOOP)}")


def _quiet_fill(targets: dict[str, str]) -> str:
    """The writable paths filled from the pristine copy; on failure, what went wrong is the
    sandbox's last word (the host reports it)."""
    return (f"__rg_out=$( ( {fill_script(targets, clear=False, owners=False)} ) 2>&1 ) || "
            "{ printf 'repogym: filling the sandbox failed: %s\\n' \"$__rg_out\"; exit 9; }\n")
