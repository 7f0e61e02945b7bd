"""Stand-ins for several machines on this one: a second Docker engine reached over TCP with
TLS, and a Ray cluster of a head and a worker node started with ``ray start``.

Everything here is private to the test process: its own ports, temporary folder, token and
process groups, so other Ray instances and the machine's engine are never touched.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
from reliability_support import SecondEngine, wait_until

RAY = str(Path(sys.executable).with_name("ray"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_tls(folder: Path) -> tuple[Path, Path]:
    """A CA, a server certificate for 127.0.0.1 and a client certificate; returns the server's
    and the client's folders (``ca.pem``, ``cert.pem``, ``key.pem`` each)."""
    server, client = folder / "server", folder / "client"
    for d in (folder, server, client):
        d.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
             "/CN=repogym-test-ca", "-keyout", "ca-key.pem", "-out", "ca.pem", cwd=folder)
    for who, ext in ((server, "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth"),
                     (client, "extendedKeyUsage=clientAuth")):
        (who / "ext.cnf").write_text(ext + "\n")
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={who.name}",
                 "-keyout", "key.pem", "-out", "req.csr", cwd=who)
        _openssl("x509", "-req", "-in", "req.csr", "-CA", "../ca.pem", "-CAkey", "../ca-key.pem",
                 "-CAcreateserial", "-days", "2", "-extfile", "ext.cnf", "-out", "cert.pem",
                 cwd=who)
        (who / "ca.pem").write_bytes((folder / "ca.pem").read_bytes())
    return server, client


class TLSEngine(SecondEngine):
    """The second engine, listening on its socket and on 127.0.0.1 over TCP with TLS (client
    certificates required)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        pid = os.getpid()
        # apart from the reliability tests' own second engine, which may run in this session
        self.bridge = f"rgc{pid % 100000}"
        self.subnet = f"100.118.{pid % 250}.1/24"
        self.server_tls, self.client_tls = make_tls(root / "tls")
        self.port = free_port()
        s = self.server_tls
        self.extra_args = ["-H", f"tcp://127.0.0.1:{self.port}", "--tlsverify",
                           f"--tlscacert={s}/ca.pem", f"--tlscert={s}/cert.pem",
                           f"--tlskey={s}/key.pem"]

    def tls_spec(self, slots: int | None = None) -> str:
        extra = f"&slots={slots}" if slots is not None else ""
        return f"tcp://127.0.0.1:{self.port}?tls={self.client_tls}{extra}"


class RayNodes:
    """A head node and a worker node on this machine, each a ``ray start --block`` process
    group of ours, with token authentication and a temporary folder of their own."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": os.urandom(16).hex(),
                    "RAY_ADDRESS": self.address, "RAY_USAGE_STATS_ENABLED": "0"}
        self.nodes: dict[str, subprocess.Popen[bytes]] = {}

    def _start(self, name: str, args: list[str], resources: dict[str, float],
               env: dict[str, str]) -> None:
        ports = [("--node-manager-port", free_port()), ("--object-manager-port", free_port()),
                 ("--metrics-export-port", free_port()),
                 ("--dashboard-agent-listen-port", free_port()),
                 ("--dashboard-agent-grpc-port", free_port()),
                 ("--runtime-env-agent-port", free_port())]
        cmd = [RAY, "start", "--block", *args, "--num-cpus", "1",
               "--resources", json.dumps(resources), "--temp-dir", str(self.root / "ray"),
               "--object-store-memory", str(80 << 20), "--disable-usage-stats",
               *[str(x) for pair in ports for x in pair]]
        log = (self.root / f"{name}.log").open("ab")
        self.nodes[name] = subprocess.Popen(cmd, env={**os.environ, **self.env, **env},
                                            stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)

    def start(self, head_env: dict[str, str], worker_env: dict[str, str],
              slots: int = 2, seconds: float = 180) -> None:
        self._start("head", ["--head", "--port", str(self.port), "--include-dashboard", "false",
                             "--ray-client-server-port", str(free_port())],
                    {"docker": slots}, head_env)
        time.sleep(2)  # the worker node needs the head's GCS up
        self._start("worker", ["--address", self.address], {"docker": slots}, worker_env)
        if not wait_until(lambda: self.alive_nodes() == 2, seconds, 1.0):
            raise RuntimeError(f"the Ray nodes did not come up: see {self.root}/*.log")

    def alive_nodes(self) -> int:
        done = subprocess.run([RAY, "status", "--address", self.address], capture_output=True,
                              text=True, env={**os.environ, **self.env}, timeout=60)
        if done.returncode != 0:
            return 0
        active = done.stdout.split("Active:", 1)[-1].split("Pending:", 1)[0]
        return sum(1 for line in active.splitlines() if line.strip().startswith("1 node_"))

    def kill(self, name: str) -> None:
        """Stops a node the hard way, as a machine that dies: its process group gets SIGKILL
        (its actors die with their raylet)."""
        proc = self.nodes.pop(name, None)
        if proc is None:
            return
        try:  # the actors are the raylet's children, in process groups of their own
            family = psutil.Process(proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            family = []
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for child in family:
            try:
                child.kill()
            except psutil.NoSuchProcess:
                continue
        proc.wait(30)

    def close(self) -> None:
        for name in list(self.nodes):
            self.kill(name)
        shutil.rmtree(self.root, ignore_errors=True)


def labelled(host: str, label: str, value: str) -> list[str]:
    """Names of the containers on the engine at ``host`` whose ``label`` is ``value``."""
    done = subprocess.run(["docker", "-H", host, "ps", "-a", "--filter",
                           f"label={label}={value}", "--format", "{{.Names}}"],
                          capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.split()
