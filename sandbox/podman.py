"""Rootless Podman as the engine: where its Docker-compatible API socket is, and how a
container is created there.

Podman serves Docker's API (``podman system service``), and the Docker backend drives it as it
is: the same containers, execs, labels, image builds and copies. What rootless Podman cannot
set (limits without delegated cgroups) is replaced per container, see
:mod:`repogym.sandbox.features`; the whole comparison is in docs/backends.md.

The socket is ``REPOGYM_PODMAN_HOST`` when set; else the running user's own
(``$XDG_RUNTIME_DIR/podman/podman.sock``); as root, the socket of :data:`ROOTLESS_USER`
(the unprivileged user ``tools/ensure_podman.sh`` makes, with subordinate ids), then
rootful Podman's ``/run/podman/podman.sock``.
"""

from __future__ import annotations

import os
import pwd
import stat
from pathlib import Path
from typing import Any

from repogym import settings
from repogym.errors import PODMAN_FIX, DockerUnavailable, SandboxError
from repogym.sandbox.base import parse_size
from repogym.sandbox.engines import Engine, parse_engine

ROOTLESS_USER = "repogym-podman"
ROOTFUL_SOCKET = "/run/podman/podman.sock"


def candidate_sockets() -> list[str]:
    """Where a Podman socket may be, most wanted first."""
    found = []
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        found.append(f"{runtime}/podman/podman.sock")
    found.append(f"/run/user/{os.getuid()}/podman/podman.sock")
    if os.geteuid() == 0:
        try:
            uid = pwd.getpwnam(ROOTLESS_USER).pw_uid
            found.append(f"/run/user/{uid}/podman/podman.sock")
        except KeyError:
            pass
        found.append(ROOTFUL_SOCKET)
    return list(dict.fromkeys(found))


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(Path(path).stat().st_mode)
    except OSError:
        return False


def podman_engine() -> Engine:
    """The Podman engine this process uses; raises :class:`DockerUnavailable` naming every
    place looked at when there is none."""
    configured = settings.PODMAN_HOST.get()
    if configured:
        return parse_engine(configured)
    places = candidate_sockets()
    for path in places:
        if _is_socket(path):
            return Engine(f"unix://{path}")
    raise DockerUnavailable("no Podman socket at " + ", ".join(places), fix=PODMAN_FIX)


# --- containers ------------------------------------------------------------------------------

# docker-py's ``containers.run`` arguments this translation knows; anything else is refused
# rather than dropped (a hardening must never go missing without a word)
_KNOWN = {"command", "name", "detach", "init", "labels", "working_dir", "network_mode",
          "cap_drop", "cap_add", "security_opt", "mem_limit", "memswap_limit", "nano_cpus",
          "pids_limit", "ulimits", "read_only", "tmpfs", "environment", "stop_signal", "user"}
CPU_PERIOD = 100_000


def run_container(client: Any, version: str, image: str, own_ids: int = 0, **options: Any
                  ) -> Any:
    """Creates and starts a container as docker-py's ``containers.run(detach=True)`` would,
    through Podman's own endpoint: its Docker-compatible one drops resource limits of the
    kernel (``ulimits``) in rootless mode (Podman issue 25881, fixed in 5.5), and those stand
    in for the cgroup limits rootless Podman cannot set. ``version``: the engine's (its own
    endpoints are versioned by it). ``own_ids``: when not 0, the container gets a user
    namespace of its own mapping that many of the engine's ids one to one (its processes
    are counted apart from other containers' for ``RLIMIT_NPROC``). Returns docker-py's
    container."""
    unknown = set(options) - _KNOWN
    if unknown:
        raise SandboxError(f"the Podman engine does not translate {sorted(unknown)}: add them "
                           "to repogym.sandbox.podman.run_container")
    api = client.api
    response = api._post_json(f"{api.base_url}/v{version}/libpod/containers/"
                              "create", data=_spec(image, options, own_ids))
    api._raise_for_status(response)
    container_id = response.json()["Id"]
    try:
        api.start(container_id)
    except BaseException:
        api.remove_container(container_id, force=True)
        raise
    return client.containers.get(container_id)


def _spec(image: str, options: dict[str, Any], own_ids: int = 0) -> dict[str, Any]:
    """Podman's container spec (``specgen``) for docker-py's arguments."""
    spec: dict[str, Any] = {
        "image": image, "name": options.get("name"), "command": options.get("command"),
        "labels": options.get("labels") or {}, "env": options.get("environment") or {},
        "work_dir": options.get("working_dir"), "init": bool(options.get("init")),
        "cap_drop": options.get("cap_drop") or [], "cap_add": options.get("cap_add") or [],
        "no_new_privileges": "no-new-privileges" in (options.get("security_opt") or []),
        "read_only_filesystem": bool(options.get("read_only")),
        # Docker adds no writable /run, /var/tmp of its own under a read-only root: nor here
        "read_only_tmpfs": False,
        "mounts": [{"destination": path, "type": "tmpfs", "source": "tmpfs",
                    "options": text.split(",")} for path, text in
                   (options.get("tmpfs") or {}).items()],
        "r_limits": [{"type": u["Name"], "soft": u["Soft"], "hard": u["Hard"]}
                     for u in options.get("ulimits") or []],
    }
    if options.get("user"):
        spec["user"] = options["user"]
    if options.get("stop_signal") == "SIGKILL":
        spec["stop_signal"] = 9
    if options.get("network_mode") == "none":
        spec["netns"] = {"nsmode": "none"}
    if own_ids:
        identity = [{"container_id": 0, "host_id": 0, "size": own_ids}]
        spec["userns"] = {"nsmode": "private"}
        spec["idmappings"] = {"HostUIDMapping": False, "HostGIDMapping": False,
                              "UIDMap": identity, "GIDMap": identity}
    limits: dict[str, Any] = {}
    if options.get("mem_limit"):
        limits["memory"] = {"limit": parse_size(options["mem_limit"]),
                            "swap": parse_size(options.get("memswap_limit") or
                                               options["mem_limit"])}
    if options.get("nano_cpus"):
        limits["cpu"] = {"quota": options["nano_cpus"] * CPU_PERIOD // 10**9,
                         "period": CPU_PERIOD}
    if options.get("pids_limit"):
        limits["pids"] = {"limit": options["pids_limit"]}
    if limits:
        spec["resource_limits"] = limits
    return spec

