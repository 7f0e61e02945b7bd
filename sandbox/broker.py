"""One pool for an async vector env's workers: the parent serves it, the workers lease from it.

gymnasium's ``AsyncVectorEnv`` makes one env in the parent process (to read the spaces), then
one env per worker process. Envs with the default pool settings would each keep a spare
container and a warm grading container: 3N containers for N workers. Instead, every process
that opens a shared pool (:mod:`repogym.sandbox.shared`) also serves it here, on a Unix
socket in the abstract namespace (nothing on disk to leave behind; containers, which have no
network, live in other namespaces and cannot see it), guarded by a random key that the peer
must prove it holds before anything is read; both are handed to child processes in
:data:`ENV_VAR`. A gymnasium worker process whose parent serves pools leases its
containers from the parent:

- the parent starts, resets in place and removes the containers, exactly as for its own envs;
- the worker gets the container's name and its shell's socket (passed as a file descriptor),
  and speaks to the shell directly, so a step costs what it costs in one process;
- grading runs in the parent too, in its warm grading containers.

N workers then hold N containers, plus one spare and one grading container per image. When a
worker's connection ends (it exited or crashed), the parent removes what it had leased.

The same socket serves other state the parent keeps for its workers: the layers above
register a function in :data:`SERVICES` (the curriculum's task statistics do), and a worker
calls it through a :class:`ServiceClient`.
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import secrets
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import (
    Client,
    Connection,
    Listener,
    answer_challenge,
    deliver_challenge,
)
from multiprocessing.reduction import recv_handle, send_handle
from typing import Any

from repogym import settings
from repogym.errors import SandboxError
from repogym.sandbox.base import SandboxConfig, default_run_id
from repogym.sandbox.client import docker_client
from repogym.sandbox.docker import DockerSandbox
from repogym.sandbox.pool import SandboxPool
from repogym.sandbox.shell import Shell
from repogym.sandbox.transport import SocketTransport

ENV_VAR = settings.POOL_BROKER.name  # "pid:run_id:key_hex:socket_name", set by the server
WORKER_PREFIX = "Worker<"  # how gymnasium names the processes of an AsyncVectorEnv
# name -> function a worker may call in the parent (registered by the layers above)
SERVICES: dict[str, Callable[..., Any]] = {}


@dataclass(frozen=True)
class Lease:
    """What a worker needs to use a container the parent started."""

    name: str
    container_id: str
    config: SandboxConfig
    user: str | None
    read_only: bool
    shell_pid: int
    cwd: str | None


# --- the serving side (the parent) ---------------------------------------------------------------

class _Session:
    """One worker's connection: its pool, its grader and the containers it holds."""

    def __init__(self, conn: Connection, open_pool: Callable[[Any], SandboxPool],
                 close_pool: Callable[[SandboxPool], None], grader_for: Callable[..., Any]):
        self.conn = conn
        self._open, self._close, self._grader_for = open_pool, close_pool, grader_for
        self.pool: SandboxPool | None = None
        self.grader: Any = None
        self.leases: dict[str, DockerSandbox] = {}

    def handle(self, op: str, *args: Any) -> Any:
        if op == "service":
            name, *rest = args
            if name not in SERVICES:
                raise ValueError(f"the parent serves no {name!r} (it serves {sorted(SERVICES)})")
            return SERVICES[name](*rest)
        if op == "open":
            self.pool = self._open(args[0])
            self.grader = self._grader_for(self.pool, args[0].grader)
            return default_run_id()
        assert self.pool is not None, "open the pool first"
        if op == "acquire":
            image, returning, overrides = args
            box = self.pool.acquire(image, returning=self.leases.pop(returning, None),
                                    **overrides)
            self.leases[box.name] = box
            return box
        if op == "release":
            self.pool.release(self.leases.pop(args[0]))
            return None
        if op == "discard":
            self.pool.discard(self.leases.pop(args[0]))
            return None
        if op == "warm_grader":
            return self.grader.warm(args[0])
        if op == "grade":
            return self.grader.grade(*args)
        if op == "ready_count":
            return self.pool.ready_count(*args)
        if op == "stats":
            return {**self.pool.stats, **self.pool.counts()}
        raise ValueError(f"unknown broker request {op!r}")

    def send_box(self, box: DockerSandbox) -> None:
        sock, pid, cwd = box.hand_over_shell()
        lease = Lease(box.name, box.container.id, box.config, box.user, box.read_only, pid, cwd)
        try:
            self.conn.send(("ok", lease))
            send_handle(self.conn, sock.fileno(), 0)
        finally:
            sock.close()  # the worker holds its own copy now

    def close(self) -> None:
        if self.pool is not None:
            for box in self.leases.values():
                self.pool.discard(box)
            pool, self.pool = self.pool, None
            self._close(pool)
        self.leases.clear()


class Broker:
    """Serves this process's shared pools to its async vector env workers."""

    def __init__(self, open_pool: Callable[[Any], SandboxPool],
                 close_pool: Callable[[SandboxPool], None], grader_for: Callable[..., Any]):
        self._session_args = (open_pool, close_pool, grader_for)
        self.pid = os.getpid()
        self.name = f"repogym-pools-{self.pid}-{secrets.token_hex(8)}"
        self.key = secrets.token_bytes(32)
        # room for every worker of a vector env connecting at once (the default is 1); the key
        # is checked in each connection's own thread, so a peer that stalls holds up no other
        self.listener = Listener("\0" + self.name, family="AF_UNIX", backlog=64)
        self._closing = False
        threading.Thread(target=self._accept, name="repogym-pool-broker", daemon=True).start()
        self.export()
        atexit.register(self.close)

    def export(self) -> None:
        """Names this broker to the child processes started from now on."""
        os.environ[ENV_VAR] = f"{self.pid}:{default_run_id()}:{self.key.hex()}:{self.name}"

    def _accept(self) -> None:
        while True:
            try:
                conn = self.listener.accept()
            except OSError:
                if self._closing:
                    return
                continue
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: Connection) -> None:
        try:  # the peer proves it holds the key before anything it sends is unpickled
            deliver_challenge(conn, self.key)
            answer_challenge(conn, self.key)
        except (OSError, EOFError, multiprocessing.AuthenticationError):
            conn.close()
            return
        session = _Session(conn, *self._session_args)
        try:
            while True:
                op, *args = conn.recv()
                try:
                    result = session.handle(op, *args)
                except Exception as exc:  # noqa: BLE001 - the worker raises it
                    conn.send(("error", _portable(exc)))
                    continue
                if isinstance(result, DockerSandbox):
                    session.send_box(result)
                else:
                    conn.send(("ok", result))
        except (EOFError, OSError):
            pass  # the worker is gone
        finally:
            session.close()
            conn.close()

    def close(self) -> None:
        if os.getpid() != self.pid:
            return
        if os.environ.get(ENV_VAR, "").startswith(f"{self.pid}:"):
            del os.environ[ENV_VAR]
        self._closing = True
        self.listener.close()


def _portable(exc: Exception) -> Exception:
    """The exception itself when it crosses a pipe intact, else a SandboxError with its text."""
    import pickle

    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001 - any failure to pickle: send the text
        return SandboxError(f"{type(exc).__name__}: {exc}")


# --- the leasing side (a worker) ------------------------------------------------------------------

def parent_address() -> tuple[int, str, bytes, str] | None:
    """The serving parent's (pid, run id, key, socket name) when this process is a gymnasium
    vector env worker whose parent serves pools."""
    if not multiprocessing.current_process().name.startswith(WORKER_PREFIX):
        return None
    value = settings.POOL_BROKER.get()
    try:
        pid, run_id, key, path = value.split(":", 3)
        if int(pid) == os.getpid():
            return None
        return int(pid), run_id, bytes.fromhex(key), path
    except ValueError:
        return None


class LeasedSandbox(DockerSandbox):
    """A container that the parent started and owns, used here through its shell.

    Closing it hands it back to be removed; :meth:`detach` stops using it without a word (the
    pool client tells the parent what to do with it).
    """

    def __init__(self, lease: Lease, sock: socket.socket, give_back: Callable[[str], None]):
        # nothing to start: the container and its shell exist
        self.config = lease.config
        self.client = docker_client()
        self.workdir = lease.config.workdir
        self.name = lease.name
        self.read_only = lease.read_only
        self.user = lease.user
        self._closed = False
        self.baseline_changes = None
        self.container = self.client.containers.prepare_model(
            {"Id": lease.container_id, "Name": "/" + lease.name})
        self._shell = Shell.adopt(SocketTransport(sock, self.container, self.user),
                                  lease.config.output_limit, lease.shell_pid, lease.cwd,
                                  reap_strays=True)
        self._give_back = give_back

    def detach(self) -> None:
        if self._shell is not None:
            self._shell.close()
            self._shell = None
        self._closed = True

    def close(self) -> None:
        if self._closed:
            return
        self.detach()
        self._give_back(self.name)


class RemotePool:
    """The parent's shared pool, as a worker's env sees it (the parts of
    :class:`~repogym.sandbox.pool.SandboxPool` that the env and the bench use)."""

    def __init__(self, address: tuple[int, str, bytes, str], key: Any):
        _, _, secret, name = address
        self.conn = Client("\0" + name, family="AF_UNIX", authkey=secret)
        self._lock = threading.Lock()
        self._closed = False
        self.run_id: str = self._call("open", key)

    def _call(self, op: str, *args: Any) -> Any:
        with self._lock:
            if self._closed:
                raise SandboxError("the pool client is closed")
            try:
                self.conn.send((op, *args))
                status, value = self.conn.recv()
                if status == "ok" and isinstance(value, Lease):
                    return value, recv_handle(self.conn)
            except (EOFError, OSError) as exc:
                raise SandboxError(f"the parent process that serves the pool is gone ({exc}); "
                                   "make the vector env again") from exc
        if status == "error":
            raise value
        return value

    def acquire(self, image: str, role: str = "agent", returning: Any = None,
                **overrides: Any) -> DockerSandbox:
        if role != "agent":
            raise ValueError("workers lease agent containers only; grading runs in the parent")
        name = None
        if isinstance(returning, LeasedSandbox):
            returning.detach()
            name = returning.name
        elif returning is not None:
            returning.close()
        lease, fd = self._call("acquire", image, name, overrides)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, fileno=fd)
        return LeasedSandbox(lease, sock, self._discard)

    def release(self, box: Any) -> None:
        if isinstance(box, LeasedSandbox):
            box.detach()
            self._call("release", box.name)
        else:
            box.close()

    def _discard(self, name: str) -> None:
        try:
            self._call("discard", name)
        except SandboxError:
            pass  # the parent is gone, and with it the container's owner

    def discard(self, box: Any) -> None:
        box.close()  # a leased one goes back to the parent to be removed

    def ready_count(self, image: str, role: str = "agent") -> int:
        return int(self._call("ready_count", image, role))

    @property
    def stats(self) -> dict[str, int]:
        return dict(self._call("stats"))

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        if self._closed:
            return
        with self._lock:
            self._closed = True
            self.conn.close()  # the parent ends the session: leases removed, pool closed


class ServiceClient:
    """A worker's connection to the parent's :data:`SERVICES`; thread-safe."""

    def __init__(self, address: tuple[int, str, bytes, str]):
        _, _, secret, name = address
        self.conn = Client("\0" + name, family="AF_UNIX", authkey=secret)
        self._lock = threading.Lock()

    def call(self, service: str, *args: Any) -> Any:
        with self._lock:
            try:
                self.conn.send(("service", service, *args))
                status, value = self.conn.recv()
            except (EOFError, OSError) as exc:
                raise SandboxError(f"the parent process that serves {service!r} is gone "
                                   f"({exc}); make the vector env again") from exc
        if status == "error":
            raise value
        return value

    def close(self) -> None:
        self.conn.close()


class RemoteGrader:
    """Grading in the parent's warm grading containers (the env calls ``warm`` and ``grade``)."""

    def __init__(self, pool: RemotePool):
        self.pool = pool

    def warm(self, image: str) -> None:
        self.pool._call("warm_grader", image)  # noqa: SLF001 - one client, two faces

    def grade(self, task: Any, patch: str, image: str) -> Any:
        return self.pool._call("grade", task, patch, image)  # noqa: SLF001
