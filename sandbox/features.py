"""What an engine is and which per-container limits it enforces, and what stands in for the
ones it cannot.

Docker and Podman answer the same API, but rootless Podman can only limit what the kernel
delegated to its user: with cgroup v1, or cgroup v2 without delegated controllers, memory,
CPU and process limits are accepted and then ignored (a warning in the create response).
Passing them is then worse than useless (on cgroup v2 a controller that is missing fails the
start), so a container gets the engine's own limits only where the engine enforces them, and
resource limits of the kernel (``setrlimit``) where it does not:

- processes: ``RLIMIT_NPROC``, which the kernel counts per user and user namespace. Rootless
  Podman's containers share the engine's user namespace by default, where one container's
  fork bomb would take the count of every container's unprivileged user; so each container
  gets a user namespace of its own that maps the engine's ids one to one (nothing to chown,
  no cost at start), and the count is the container's;
- memory: ``RLIMIT_DATA`` (a process's private writable memory), per process, not per
  container; the tmpfs mounts keep their sizes either way;
- CPU: nothing stands in; the container may use every core.

See docs/backends.md for the whole comparison.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import docker.types

from repogym.sandbox.base import parse_size
from repogym.sandbox.engines import client_key

LIMITS = ("memory", "cpu", "pids")
# RLIMIT_NPROC counts a user's processes in the container's user namespace: root's there
# include the engine's own (conmon, the init) as well as the harness's, so the bound is at
# least the grader's pids limit, far from the host's either way
NPROC_FLOOR = 1024


@dataclass(frozen=True)
class EngineFeatures:
    """One engine: its kind and version, whether it runs rootless, and which limits hold."""

    kind: str  # "docker" or "podman"
    version: str
    rootless: bool = False
    runtime: str = ""
    cgroup_version: str = ""
    limits: frozenset[str] = field(default_factory=lambda: frozenset(LIMITS))
    ids: int = 0  # rootless: how many ids the engine's user namespace maps (0: not rootless)

    @property
    def missing(self) -> tuple[str, ...]:
        """The limits the engine cannot enforce, in :data:`LIMITS` order."""
        return tuple(name for name in LIMITS if name not in self.limits)

    @property
    def network(self) -> str:
        """The network mode of a container that needs the network (an image build): rootless
        Podman's bridge needs a network namespace of its own that it may not be able to make
        (no systemd), while slirp4netns needs nothing."""
        return "slirp4netns" if self.kind == "podman" and self.rootless else "bridge"

    def describe(self) -> str:
        """One line for `repogym doctor`: the engine, and how each limit holds."""
        mode = "rootless" if self.rootless else "rootful"
        held = ", ".join(name for name in LIMITS if name in self.limits) or "none"
        text = (f"{self.kind.capitalize()} {self.version} ({mode}, runtime {self.runtime or '?'}"
                f", cgroup v{self.cgroup_version or '?'}; limits it enforces: {held}")
        if self.missing:
            text += "; instead " + ", ".join(f"{name}: {STAND_INS[name]}"
                                             for name in self.missing)
        return text + ")"

    def as_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "version": self.version, "rootless": self.rootless,
                "runtime": self.runtime, "cgroup_version": self.cgroup_version,
                "limits": [name for name in LIMITS if name in self.limits],
                "stand_ins": {name: STAND_INS[name] for name in self.missing}}


STAND_INS = {"pids": "RLIMIT_NPROC per container",
             "memory": "RLIMIT_DATA per process", "cpu": "none"}
_cache: dict[str, EngineFeatures] = {}
_lock = threading.Lock()


def engine_features(client: Any) -> EngineFeatures:
    """The features of ``client``'s engine, asked once per engine and process."""
    key = client_key(client)
    with _lock:
        if key in _cache:
            return _cache[key]
    found = _detect(client)
    with _lock:
        _cache[key] = found
    return found


def _detect(client: Any) -> EngineFeatures:
    version = client.version()
    names = {str(c.get("Name", "")): c for c in version.get("Components") or []}
    podman = names.get("Podman Engine")
    if podman is not None:
        return _podman(client, str(podman.get("Version") or version.get("Version") or ""),
                       str((podman.get("Details") or {}).get("APIVersion") or ""))
    info = client.info()
    security = " ".join(info.get("SecurityOptions") or [])
    held = {"memory": info.get("MemoryLimit", True), "cpu": info.get("CpuCfsQuota", True),
            "pids": info.get("PidsLimit", True)}
    return EngineFeatures("docker", str(version.get("Version") or ""),
                          rootless="name=rootless" in security,
                          runtime=str(info.get("DefaultRuntime") or ""),
                          cgroup_version=str(info.get("CgroupVersion") or ""),
                          limits=frozenset(k for k, v in held.items() if v))


def _podman(client: Any, version: str, api: str) -> EngineFeatures:
    """Podman's compatible /info claims every limit; its own /libpod/info names the cgroup
    controllers the engine may really use (none for rootless on cgroup v1)."""
    api_client = client.api
    response = api_client._get(f"{api_client.base_url}/v{api or '4.0.0'}/libpod/info")
    api_client._raise_for_status(response)
    host = response.json().get("host") or {}
    controllers = set(host.get("cgroupControllers") or [])
    rootless = bool((host.get("security") or {}).get("rootless"))
    uidmap = (host.get("idMappings") or {}).get("uidmap") or []
    return EngineFeatures("podman", version, rootless=rootless,
                          runtime=str((host.get("ociRuntime") or {}).get("name") or ""),
                          cgroup_version=str(host.get("cgroupVersion") or "").lstrip("v"),
                          limits=frozenset(name for name in LIMITS if name in controllers),
                          ids=sum(int(m.get("size") or 0) for m in uidmap) if rootless else 0)


def limit_options(features: EngineFeatures, memory: str, cpus: float, pids_limit: int
                  ) -> dict[str, Any]:
    """docker-py's ``containers.run`` arguments for the limits: the engine's where it enforces
    them, kernel resource limits where it does not (see the module's docstring)."""
    options: dict[str, Any] = {}
    ulimits = []
    if "memory" in features.limits:
        options.update(mem_limit=memory, memswap_limit=memory)
    else:
        size = parse_size(memory)
        ulimits.append(docker.types.Ulimit(name="data", soft=size, hard=size))
    if "cpu" in features.limits:
        options["nano_cpus"] = int(cpus * 1e9)
    if "pids" in features.limits:
        options["pids_limit"] = pids_limit
    else:
        nproc = max(pids_limit, NPROC_FLOOR)
        ulimits.append(docker.types.Ulimit(name="nproc", soft=nproc, hard=nproc))
    if ulimits:
        options["ulimits"] = ulimits
    return options
