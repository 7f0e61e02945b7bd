"""Docker engines other than the local one, and a list of them balanced by free slots.

An engine is named by a URL, as ``DOCKER_HOST`` names one: ``unix:///var/run/docker.sock``,
``ssh://user@host`` (through the ``ssh`` program, with the user's keys and config) or
``tcp://host:2376`` with TLS. ``REPOGYM_DOCKER_HOSTS`` lists several, separated by commas or
spaces; each may carry options after a ``?``::

    REPOGYM_DOCKER_HOSTS="ssh://ci@box1?slots=32, tcp://box2:2376?tls=/etc/repogym/box2"

- ``slots=N``: episodes the engine holds at once (default: its CPU count).
- ``tls=DIR``: a folder with ``ca.pem``, ``cert.pem`` and ``key.pem`` (Docker's
  ``DOCKER_CERT_PATH`` layout); for ``tcp://`` without it, ``DOCKER_CERT_PATH`` is used when
  ``DOCKER_TLS_VERIFY`` is set. Plain TCP reaches only loopback addresses: an engine's API
  without TLS gives root on its host to whoever reaches the port.

A process runs its containers on one engine (see :mod:`repogym.sandbox.client`): the one
with the most free slots (slots minus the repogym episode containers running there) when the
process first needs one. An engine that stops answering is taken out for ``RETRY_AFTER``
seconds. Images move between engines by their tag, which names their content
(``repogym/repo:<slug>-<hash of the spec>``): an engine that lacks a tag is sent it with
``docker save`` / ``docker load`` from a listed engine (or one of ``REPOGYM_IMAGE_SOURCES``;
for a Podman engine, also this machine's Docker engine) that has it, so nothing is built twice.
"""

from __future__ import annotations

import fcntl
import hashlib
import ipaddress
import os
import re
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import docker
import docker.errors
import requests.exceptions

from repogym import settings
from repogym.errors import DOCKER_FIX, PODMAN_FIX, DockerUnavailable, SandboxError
from repogym.sandbox.base import LABEL_MANAGED, LABEL_ROLE

HOSTS_VAR = settings.DOCKER_HOSTS.name
SOURCES_VAR = settings.IMAGE_SOURCES.name
RETRY_AFTER = 60.0  # seconds an engine that stopped answering stays out
_SCHEMES = ("unix", "tcp", "ssh")
_UNREACHABLE = (requests.exceptions.ConnectionError, requests.exceptions.Timeout,
                ConnectionError, docker.errors.DockerException)


@dataclass(frozen=True)
class Engine:
    """One Docker engine: where it is, how many episodes it holds, and its TLS folder."""

    url: str
    slots: int | None = None  # None: the engine's CPU count
    tls: str | None = None

    def __post_init__(self) -> None:
        scheme = self.url.split("://", 1)[0] if "://" in self.url else ""
        if scheme not in _SCHEMES:
            raise ValueError(f"Docker engine {self.url!r}: write unix:///path/docker.sock, "
                             "ssh://user@host or tcp://host:2376")
        if self.slots is not None and self.slots < 0:
            raise ValueError(f"{self.url}: slots={self.slots} must be >= 0")
        if scheme == "tcp" and self.tls_dir() is None and not _loopback(self.url):
            raise ValueError(
                f"{self.url} without TLS gives root on that host to whoever reaches the port: "
                "add ?tls=DIR (ca.pem, cert.pem, key.pem), set DOCKER_TLS_VERIFY=1 and "
                "DOCKER_CERT_PATH, or use ssh://user@host")

    @property
    def spec(self) -> str:
        """The text that parses back into this engine."""
        opts = [f"slots={self.slots}"] * (self.slots is not None) + [f"tls={self.tls}"] * bool(
            self.tls)
        return self.url + ("?" + "&".join(opts) if opts else "")

    def tls_dir(self) -> str | None:
        if self.tls:
            return self.tls
        if self.url.startswith("tcp://") and os.environ.get("DOCKER_TLS_VERIFY"):
            return os.environ.get("DOCKER_CERT_PATH") or str(Path.home() / ".docker")
        return None


def _loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_engine(text: str) -> Engine:
    url, _, query = text.strip().partition("?")
    opts = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}
    unknown = set(opts) - {"slots", "tls"}
    if unknown:
        raise ValueError(f"{text!r}: unknown option {sorted(unknown)}; use slots=N, tls=DIR")
    slots = opts.get("slots")
    if slots is not None and not slots.isdigit():
        raise ValueError(f"{text!r}: slots={slots!r} is not a whole number")
    return Engine(url, int(slots) if slots is not None else None, opts.get("tls") or None)


def parse_engines(text: str) -> list[Engine]:
    """Engines from a comma- or space-separated list; duplicates keep their first place."""
    engines: dict[str, Engine] = {}
    for part in re.split(r"[,\s]+", text.strip()):
        if part:
            engine = parse_engine(part)
            engines.setdefault(engine.url, engine)
    return list(engines.values())


def configured() -> list[Engine]:
    """The engines of ``REPOGYM_DOCKER_HOSTS`` (empty when it is unset)."""
    return parse_engines(settings.DOCKER_HOSTS.get())


def image_sources() -> list[Engine]:
    """Engines images may be copied from: the listed ones, then ``REPOGYM_IMAGE_SOURCES``."""
    seen = {e.url: e for e in configured()}
    for engine in parse_engines(settings.IMAGE_SOURCES.get()):
        seen.setdefault(engine.url, engine)
    return list(seen.values())


def local_engine() -> Engine | None:
    """The engine ``DOCKER_HOST`` names, or None for docker-py's default socket."""
    host = os.environ.get("DOCKER_HOST")
    return parse_engine(host) if host else None


# --- clients ---------------------------------------------------------------------------------


def make_client(engine: Engine | None, timeout: int | None = None) -> docker.DockerClient:
    """A client of ``engine`` (None: ``DOCKER_HOST`` or the local socket) that answered a ping;
    raises :class:`DockerUnavailable` naming the engine otherwise."""
    timeout = timeout or settings.DOCKER_TIMEOUT.integer()
    host = os.environ.get("DOCKER_HOST", "")
    if engine is None and host.startswith("tcp://") and os.environ.get("DOCKER_TLS_VERIFY"):
        engine = Engine(host)  # TLS from DOCKER_CERT_PATH, with the CA fix of _client
    try:
        if engine is None:
            client = docker.from_env(timeout=timeout)
        else:
            client = _client(engine, timeout)
        client.ping()
    except (docker.errors.DockerException, requests.exceptions.RequestException,
            ConnectionError) as exc:
        where = f" at {engine.url}" if engine is not None else ""
        podman = engine is not None and engine.url.endswith("podman.sock")
        raise DockerUnavailable(f"engine{where}: {_first_line(exc)}",
                                fix=PODMAN_FIX if podman else DOCKER_FIX) from exc
    return client


def _client(engine: Engine, timeout: int) -> docker.DockerClient:
    tls = _tls_config(engine)
    ssh = engine.url.startswith("ssh://")
    if not tls:
        return docker.DockerClient(base_url=engine.url, timeout=timeout, use_ssh_client=ssh)
    # requests lets REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE (set on machines behind a TLS proxy)
    # replace the engine's own CA, and then fails to verify it: the environment is ignored,
    # from the first request on (asking the API version) to the last
    probe = docker.APIClient(base_url=engine.url, timeout=timeout, tls=tls,
                             version=docker.constants.MINIMUM_DOCKER_API_VERSION)
    probe.trust_env = False
    version = str(probe.version(api_version=False)["ApiVersion"])
    probe.close()
    client = docker.DockerClient(base_url=engine.url, timeout=timeout, tls=tls, version=version)
    client.api.trust_env = False
    return client


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:200]


def _tls_config(engine: Engine) -> Any:
    folder = engine.tls_dir()
    if folder is None:
        return False
    files = {name: Path(folder) / f"{name}.pem" for name in ("ca", "cert", "key")}
    missing = [str(p) for p in files.values() if not p.is_file()]
    if missing:
        raise ValueError(f"{engine.url}: TLS files missing: {', '.join(missing)}")
    return docker.tls.TLSConfig(client_cert=(str(files["cert"]), str(files["key"])),
                                ca_cert=str(files["ca"]), verify=True)


# --- free slots and picking ------------------------------------------------------------------

_out: dict[str, float] = {}  # engine URL -> when it was taken out
_out_lock = threading.Lock()


def take_out(url: str) -> None:
    """Marks an engine as not answering: no process-local pick chooses it for a while."""
    with _out_lock:
        _out[url] = time.monotonic()


def is_out(url: str) -> bool:
    with _out_lock:
        since = _out.get(url)
        if since is not None and time.monotonic() - since > RETRY_AFTER:
            del _out[url]
            return False
        return since is not None


def capacity(engine: Engine, client: Any) -> int:
    if engine.slots is not None:
        return engine.slots
    return max(1, int(client.info().get("NCPU") or 1))


def busy(client: Any) -> int:
    """Episode containers of repogym running on the engine, whoever owns them."""
    rows = client.api.containers(filters={"label": [f"{LABEL_MANAGED}=1", f"{LABEL_ROLE}=agent"],
                                          "status": "running"})
    return len(rows)


def free_slots(engine: Engine, client: Any | None = None) -> int:
    client = client or make_client(engine, timeout=10)
    try:
        return capacity(engine, client) - busy(client)
    except _UNREACHABLE as exc:
        raise DockerUnavailable(f"engine at {engine.url}: {_first_line(exc)}") from exc


def pick(engines: list[Engine], exclude: set[str] | frozenset[str] = frozenset(),
         taken: dict[str, int] | None = None) -> Engine:
    """The engine with the most free slots, less ``taken`` (slots promised but not started
    yet). Engines that do not answer are taken out; raises when none answers."""
    best: tuple[int, int, Engine] | None = None
    failures = []
    for rank, engine in enumerate(engines):
        if engine.url in exclude or is_out(engine.url):
            failures.append(f"{engine.url} (taken out)")
            continue
        try:
            free = free_slots(engine) - (taken or {}).get(engine.url, 0)
        except DockerUnavailable as exc:
            take_out(engine.url)
            failures.append(exc.detail)
            continue
        if best is None or (free, -rank) > (best[0], best[1]):
            best = (free, -rank, engine)
    if best is None:
        raise DockerUnavailable("none of the engines answers: " + "; ".join(failures))
    return best[2]


# --- images by content hash ------------------------------------------------------------------


def client_key(client: Any) -> str:
    """Which engine a client speaks to, without asking it (docker-py names every unix socket
    ``http+docker://localhost``; the socket's path tells them apart)."""
    adapter = getattr(client.api, "_custom_adapter", None)
    return str(getattr(adapter, "socket_path", None) or client.api.base_url)


def engine_id(client: Any) -> str:
    """Tells engines apart: engines on one machine may share the ID (it comes from the
    machine-wide key.json), never the data root as well."""
    info = client.info()
    return f"{info.get('ID')}|{info.get('Name')}|{info.get('DockerRootDir')}"


def copy_image(tag: str, target: Any, sources: list[Engine] | None = None) -> bool:
    """Sends ``tag`` to the ``target`` client's engine from the first source engine that has
    it (``docker save`` there, ``docker load`` here, streamed). False when none has it.

    The tag names the image's content, so a copy is the very image a build would make; the
    copy is checked to have the source's image id. One copy per (engine, tag) at a time on
    this machine.
    """
    candidates = image_sources() + _docker_beside(target) if sources is None else sources
    if not candidates:
        return False
    here = engine_id(target)
    lock = Path(tempfile.gettempdir()) / ("repogym-copy-" + hashlib.sha256(
        f"{here}\0{tag}".encode()).hexdigest()[:16] + ".lock")
    with lock.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            if _has(target, tag):
                return True  # another process copied it meanwhile
            for engine in candidates:
                if is_out(engine.url):
                    continue
                try:
                    source = make_client(engine, timeout=600)
                    if engine_id(source) == here or not _has(source, tag):
                        continue
                    _stream(tag, source, target)
                except DockerUnavailable:
                    take_out(engine.url)
                    continue
                return True
            return False
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


LOCAL_DOCKER = "unix:///var/run/docker.sock"


def _docker_beside(target: Any) -> list[Engine]:
    """This machine's Docker engine, when ``target`` is a Podman engine beside it and no
    source lists it: Podman gets the images Docker has built instead of building them again."""
    if not Path(LOCAL_DOCKER[len("unix://"):]).exists() or any(
            e.url == LOCAL_DOCKER for e in image_sources()):
        return []
    names = [str(c.get("Name", "")) for c in target.version().get("Components") or []]
    return [Engine(LOCAL_DOCKER)] if "Podman Engine" in names else []


def _has(client: Any, tag: str) -> bool:
    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def _stream(tag: str, source: Any, target: Any) -> None:
    wanted = source.images.get(tag).id
    try:
        chunks = source.api.get_image(tag, chunk_size=1 << 20)
        for _ in target.api.load_image(chunks, quiet=True):
            pass
    except (docker.errors.APIError, requests.exceptions.RequestException) as exc:
        raise SandboxError(f"copying {tag} between engines failed: {exc}") from exc
    got = target.images.get(tag).id
    if got != wanted:
        raise SandboxError(f"{tag} arrived as {got}, not {wanted}: the engines disagree on "
                           "its content; rebuild it with `repogym images build`")
