"""The Docker sandbox: a hardened container with one persistent shell spoken to over a socket."""

from __future__ import annotations

import io
import socket
import tarfile
import threading
import time
import uuid
import warnings
from typing import Any

import docker.errors

from repogym import settings
from repogym.errors import RepogymError, SandboxError
from repogym.sandbox import owners, podman
from repogym.sandbox.base import (
    LABEL_ROLE,
    LABEL_RUN,
    ExecResult,
    SandboxConfig,
    SandboxLost,
)
from repogym.sandbox.client import docker_client, engine_errors
from repogym.sandbox.engines import client_key
from repogym.sandbox.features import engine_features, limit_options
from repogym.sandbox.pristine import NO_PRISTINE, fill_script, sources
from repogym.sandbox.shell import OutputCapture, Shell, ShellDied
from repogym.sandbox.shell_files import ShellFiles
from repogym.sandbox.transport import SocketTransport, exec_with_input, exit_code
from repogym.sandbox.util import restart_note

USER_LABEL = "org.repogym.user"
# What root needs to fill the tmpfs mounts with the pristine copy, owners and modes kept. Only
# the harness's own root execs hold them: the agent's user has no capabilities at all, and
# no-new-privileges keeps it from gaining any.
FILL_CAPS = ("CHOWN", "DAC_OVERRIDE", "FOWNER")

_reaped: set[str] = set()  # engines this process has cleaned of dead owners' containers
_reap_lock = threading.Lock()
# Docker daemons choke on tens of simultaneous container starts: at most this many at once.
_start_slots: threading.BoundedSemaphore | None = None
_slots_lock = threading.Lock()


def start_slots() -> threading.BoundedSemaphore:
    """The process's container starts at once (``REPOGYM_MAX_STARTS``, read at the first)."""
    global _start_slots
    with _slots_lock:
        if _start_slots is None:
            _start_slots = threading.BoundedSemaphore(settings.MAX_STARTS.integer())
        return _start_slots


class DockerSandbox(ShellFiles):
    """A container started from ``config.image`` with limits, labels and a persistent shell.

    Network off unless asked for, all capabilities dropped, no new privileges, memory / CPU /
    process limits, a read-only root with size-limited tmpfs for the writable paths, and the
    image's unprivileged user when it has one.
    """

    def __init__(self, config: SandboxConfig, client: Any = None):
        self.config = config
        self.client = client or docker_client()
        self.workdir = config.workdir
        self.name = f"repogym-{config.run_id}-{uuid.uuid4().hex[:8]}"
        self.read_only = config.read_only
        self._closed = False
        self._shell: Shell | None = None
        self.baseline_changes: set[str] | None = None
        reap_dead_owners(self.client)
        self._start_container()
        if config.shell:
            try:
                self._shell = self._start_shell(self.workdir)
            except Exception:
                self.close()
                raise

    # --- lifecycle ---------------------------------------------------------------------------

    # The container's own process (sleep, under docker-init) keeps the image's user, root in
    # our images, while every agent process runs as the unprivileged user: `kill -9 -1` from
    # the agent then cannot stop the container.
    def _start_container(self) -> None:
        cfg = self.config
        with engine_errors(f"look up image {cfg.image}"):
            try:
                image = self.client.images.get(cfg.image)
            except docker.errors.ImageNotFound as exc:
                raise SandboxError(
                    f"image {cfg.image} is not built: run `repogym images build --suite SUITE`."
                ) from exc
        image_user = (image.labels or {}).get(USER_LABEL)
        self.user = cfg.user if cfg.user and cfg.user == image_user else None
        labels = {**owners.owner_labels(), LABEL_RUN: cfg.run_id, LABEL_ROLE: cfg.role}
        labels.update(dict(cfg.labels))
        # tracked before it exists: a start that fails half way (created, never started)
        # leaves nothing behind either
        owners.track(self.name, self._remove)
        try:
            with start_slots(), engine_errors(f"start a container from {cfg.image}"):
                self.container = self._run_container(labels)
            if self.read_only and not self._fill(clear=False):
                self._restart_writable(labels)
        except BaseException:
            self._remove()
            owners.untrack(self.name)
            raise

    def _restart_writable(self, labels: dict[str, str]) -> None:
        image = self.config.image
        warnings.warn(f"{image} has no pristine copy to fill a read-only container from; its "
                      "root stays writable (rebuild it: `repogym images build`).", stacklevel=4)
        self._remove()
        self.read_only = False
        with start_slots(), engine_errors(f"start a container from {image}"):
            self.container = self._run_container(labels)

    def _run_container(self, labels: dict[str, str]) -> Any:
        cfg = self.config
        caps = set(cfg.cap_add) | (set(FILL_CAPS) if self.read_only else set())
        features = engine_features(self.client)
        options = dict(
            command=["sleep", "infinity"],
            name=self.name,
            detach=True,
            init=True,
            labels=labels,
            working_dir=cfg.workdir,
            network_mode="bridge" if cfg.network else "none",
            cap_drop=["ALL"],
            cap_add=sorted(caps) or None,
            security_opt=["no-new-privileges"],
            # the engine's limits where it enforces them, kernel rlimits where it cannot
            # (rootless Podman without delegated cgroups): see features.py
            **limit_options(features, cfg.memory, cfg.cpus, cfg.pids_limit),
            read_only=self.read_only,
            tmpfs=self._mounts(),
            environment=dict(cfg.env),
            stop_signal="SIGKILL",
        )
        if features.kind == "podman":
            return podman.run_container(self.client, features.version, cfg.image,
                                        own_ids=features.ids, **options)
        return self.client.containers.run(cfg.image, **options)

    def _mounts(self) -> dict[str, str]:
        mounts = {"/tmp": f"size={self.config.tmpfs_size},mode=1777"}
        if self.read_only:
            for path, size in self.config.writable:
                shared = path.rstrip("/").endswith("tmp")
                mounts[path] = f"size={size},mode=1777" if shared else f"size={size},mode=755,exec"
        return mounts

    def fill_targets(self) -> dict[str, str]:
        """The writable paths filled from the image's pristine copy."""
        found = sources(self.workdir, self.user)
        if not self.read_only:
            return found
        writable = {path for path, _ in self.config.writable}
        return {path: src for path, src in found.items() if path in writable}

    def _fill(self, clear: bool) -> bool:
        """Fills the tmpfs mounts; False when the image has no pristine copy."""
        result = self.exec(["bash", "-c", fill_script(self.fill_targets(), clear)], user="root",
                           timeout=300)
        if NO_PRISTINE in result.output:
            return False
        if result.exit_code != 0:
            raise SandboxError(f"could not fill {self.name} from its image's pristine copy: "
                               f"{result.output.strip()[-300:]}")
        return True

    def _start_shell(self, cwd: str) -> Shell:
        api = self.client.api
        home = "/tmp" if self.user is None else f"/home/{self.user}"
        env = {"HOME": home, **dict(self.config.env)}
        with engine_errors(f"start a shell in {self.name}"):
            exec_id = api.exec_create(
                self.container.id,
                ["bash", "--noprofile", "--norc", "-s"],
                stdin=True,
                stdout=True,
                stderr=True,
                tty=False,
                user=self.user or "",
                workdir=cwd,
                environment=env,
            )["Id"]
            raw = api.exec_start(exec_id, socket=True)
        try:
            return Shell(SocketTransport(raw, self.container, self.user),
                         self.config.output_limit, reap_strays=True)
        except ShellDied as exc:  # the container went away under it (removed, stopped)
            raise SandboxError(f"no shell started in {self.name}: {exc}") from exc

    def hand_over_shell(self) -> tuple[socket.socket, int, str | None]:
        """The shell's socket, pid and working folder, for another process to speak to it.

        This object stops speaking to the shell (it keeps the socket open until the caller
        closes it); the next in-place reset starts a new shell.
        """
        if self._shell is None or not isinstance(self._shell.transport, SocketTransport):
            raise SandboxError(f"{self.name} has no shell to hand over")
        shell, self._shell = self._shell, None
        assert isinstance(shell.transport, SocketTransport)
        return shell.transport.sock, shell.pid, shell.cwd

    def restart_shell(self) -> None:
        """A fresh shell in the repository root (after an in-place reset)."""
        if self._shell is not None:
            self._shell.close()
        self._shell = self._start_shell(self.workdir) if self.config.shell else None

    def state(self) -> str:
        """The container's status (``running``, ``exited``, ...) or ``removed``.

        Raises :class:`~repogym.errors.DockerUnavailable` when the engine does not answer.
        """
        with engine_errors(f"inspect {self.name}"):
            try:
                self.container.reload()
            except docker.errors.NotFound:
                return "removed"
        return str(self.container.status)

    def alive(self) -> bool:
        if self._closed:
            return False
        try:
            return self.state() == "running"
        except RepogymError:
            return False

    def close(self) -> None:
        """Removes the container. If the engine cannot be reached, raises and keeps it on the
        list that is removed when the process exits."""
        if self._closed:
            return
        self._closed = True
        if self._shell is not None:
            self._shell.close()
            self._shell = None
        self._remove()
        owners.untrack(self.name)

    def _remove(self) -> None:
        with engine_errors(f"remove {self.name}"):
            try:
                self.client.api.remove_container(self.name, force=True, v=True)
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as exc:
                if "already in progress" not in str(exc):
                    raise

    def __enter__(self) -> DockerSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- commands ----------------------------------------------------------------------------

    def run(self, command: str, timeout: float = 60.0) -> ExecResult:
        if self._closed or self._shell is None:
            raise SandboxError(f"{self.name} is closed")
        try:
            return self._shell.run(command, timeout)
        except ShellDied as died:
            return self._recover(str(died))

    def _recover(self, reason: str) -> ExecResult:
        """Starts a new shell after the old one died.

        A container that stopped is an infrastructure failure when the agent runs
        unprivileged (it cannot stop it: the container's processes are root's): it raises
        :class:`SandboxLost`, and the episode runs again. A root agent may have stopped it
        itself: it is restarted.
        """
        cwd = (self._shell.cwd if self._shell else None) or self.workdir
        if self._shell is not None:
            self._shell.close()
            self._shell = None
        state = self.state()
        if state != "running":
            if self.user is not None or state == "removed":
                raise SandboxLost(f"{self.name} is {state}: the engine restarted or someone "
                                  "removed it; run the episode again.")
            reason += self._restart_container()
        for attempt in range(3):
            try:
                self._shell = self._start_shell(cwd if attempt == 0 else self.workdir)
                break
            except (SandboxError, ShellDied):
                time.sleep(0.2 * (attempt + 1))
        else:
            raise SandboxError(f"{self.name}: no shell could be started after: {reason}")
        return ExecResult(restart_note(reason, self._shell.cwd or cwd), -1, shell_restarted=True)

    def _restart_container(self) -> str:
        with engine_errors(f"restart {self.name}"):
            self.container.restart(timeout=0)
        if self.read_only:
            self._fill(clear=True)
            return "; the container had stopped and was restarted, the repository as it was at " \
                   "the start"
        return "; the container had stopped and was restarted"

    def exec(self, argv: list[str], user: str | None = None, timeout: float = 60.0,
             limit: int | None = None) -> ExecResult:
        """One ``docker exec`` outside the shell (``user="root"`` for the harness's own steps).

        The command is wrapped in ``timeout``; output is streamed and only head and tail kept.
        """
        limit = limit or self.config.output_limit
        wrapped = ["timeout", "-k", "5", str(max(1, int(timeout))), *argv]
        api = self.client.api
        start = time.monotonic()
        capture = OutputCapture(limit)
        with engine_errors(f"exec in {self.name}"):
            exec_id = api.exec_create(self.container.id, wrapped, stdout=True, stderr=True,
                                      user=user if user is not None else (self.user or ""),
                                      workdir=self.workdir)["Id"]
            for chunk in api.exec_start(exec_id, stream=True):
                capture.add(chunk)
            code = exit_code(api, exec_id, f"{argv[0]} in {self.name}")
        output, truncated = capture.text()
        return ExecResult(output, code, timed_out=code in (124, 137), truncated=truncated,
                          n_bytes=capture.total, duration=time.monotonic() - start)

    def put_files(self, files: dict[str, bytes], dest: str, owner: int = 0) -> None:
        """Writes files (paths relative to ``dest``) with one archive, as root."""
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for name, data in files.items():
                info = tarfile.TarInfo(name)
                info.size, info.mode, info.uid, info.gid = len(data), 0o644, owner, owner
                info.mtime = int(time.time())
                tar.addfile(info, io.BytesIO(data))
        argv = ["tar", "-x", "-f", "-", "-C", dest] + (["--no-same-owner"] if owner == 0 else [])
        code, out = exec_with_input(self.client.api, self.container.id, argv, buf.getvalue(),
                                    user="root")
        if code != 0:
            raise SandboxError(f"could not upload files into {self.name}:{dest}: {out[-300:]!r}")


def reap_dead_owners(client: Any) -> list[str]:
    """Removes, once per process and engine, the containers that dead owners on this host left
    behind."""
    with _reap_lock:
        key = client_key(client)
        if key in _reaped:
            return []
        _reaped.add(key)
    with engine_errors("list leftover containers"):
        return owners.remove_containers(owners.leftovers(client), client)
