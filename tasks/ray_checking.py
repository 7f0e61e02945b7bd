"""Checking candidates on a Ray cluster (``repogym tasks add ... --ray ADDRESS``).

The driver makes the candidates, as on one machine; each check goes to one of ``workers``
actors (one CPU slot each, spread over the nodes), which holds a ``Checker`` of its own: its
node's Docker engine, images, warm containers and per-image baselines. A task refers to its
repository by a path on the driver, so the repository travels with the work: the first check
of a repository on an actor carries it whole (a git bundle, put in Ray's object store once);
a candidate commit made after that carries only itself (a bundle of the commits the actor's
copy lacks). What the actor returns points at the driver's repository again.

Addresses as for ``repogym eval --ray``: ``local`` starts a private Ray for the run, ``auto``
joins the cluster this machine belongs to, anything else goes to ``ray.init(address=...)``.
Every node needs Docker and the same repogym installation.
"""

from __future__ import annotations

import queue
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

from repogym.errors import RepogymError, TaskError
from repogym.ray_cluster import connect, ray_module, slots
from repogym.schema import Task
from repogym.tasks.checking import Checker, CheckOptions
from repogym.tasks.sources.common import run_git

SHIP_REF = "refs/repogym-ship"


class _Actor:
    """A ``Checker`` on one Ray worker, and its copies of the driver's repositories."""

    def __init__(self, options: CheckOptions) -> None:
        self.checker = Checker(options)
        self.folder = Path(tempfile.mkdtemp(prefix="repogym-ray-repos-"))
        self.repos: dict[str, Path] = {}

    def derive(self, task: Task, key: str, whole: bytes, extra: bytes | None
               ) -> tuple[Task | None, str]:
        """``whole`` arrives as bytes: Ray hands an object-store reference over as its value."""
        path = self._repository(key, whole, extra)
        return self.checker.derive(task.with_(source=str(path)))

    def _repository(self, key: str, whole: bytes, extra: bytes | None) -> Path:
        path = self.repos.get(key)
        if path is None:
            path = self.folder / f"{len(self.repos)}.git"
            bundle = self.folder / "whole.bundle"
            bundle.write_bytes(whole)
            subprocess.run(["git", "clone", "--quiet", "--mirror", str(bundle), str(path)],
                           check=True, capture_output=True)
            bundle.unlink()
            self.repos[key] = path
        if extra:
            bundle = self.folder / "extra.bundle"
            bundle.write_bytes(extra)
            run_git(path, "fetch", "--quiet", str(bundle), f"+{SHIP_REF}/*:{SHIP_REF}/*")
            bundle.unlink()
        return path

    def summary(self) -> dict[str, Any]:
        return self.checker.summary()

    def close(self) -> None:
        self.checker.close()
        shutil.rmtree(self.folder, ignore_errors=True)


class RayChecker:
    """``derive`` for a source, each call run by an idle actor of the cluster."""

    def __init__(self, address: str, options: CheckOptions) -> None:
        ray = ray_module()
        self.ray: Any = ray
        self.started = connect(address, options.workers)
        n = slots(options.workers, options.workers, print)
        remote: Any = ray.remote(num_cpus=1)(_Actor)
        self.actors: list[Any] = [remote.options(scheduling_strategy="SPREAD").remote(options)
                       for _ in range(n)]
        self.idle: queue.Queue[Any] = queue.Queue()
        for actor in self.actors:
            self.idle.put(actor)
        self._lock = threading.Lock()
        self.shipper = Shipper()
        self._whole: dict[str, Any] = {}  # repository -> its bundle in the object store
        self._shipped: dict[tuple[int, str], set[str]] = {}  # (actor, repository) -> commits

    def __enter__(self) -> RayChecker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def derive(self, task: Task) -> tuple[Task | None, str]:
        source = task.source or ""
        actor = self.idle.get()
        try:
            whole, extra = self._ship(id(actor), source, task.base_commit)
            done, reason = self.ray.get(actor.derive.remote(task, source, whole, extra))
        except self.ray.exceptions.RayError as exc:
            raise RepogymError(f"a Ray worker failed: {str(exc).splitlines()[0][:200]}") from exc
        finally:
            self.idle.put(actor)
        return (done.with_(source=source) if done is not None else None), reason

    def _ship(self, actor: int, source: str, commit: str) -> tuple[Any, bytes | None]:
        """What ``actor`` needs of ``source`` to hold ``commit``: the whole repository (the
        object-store copy, sent once) and a bundle of what it lacks, if anything."""
        with self._lock:
            if source not in self._whole:
                self._whole[source] = self.ray.put(self.shipper.whole(Path(source)))
            whole = self._whole[source]
            shipped = self._shipped.setdefault((actor, source), set())
            if commit in shipped:
                return whole, None
        extra = self.shipper.extra(Path(source), commit)
        with self._lock:
            shipped.add(commit)
        return whole, extra

    def summary(self) -> dict[str, Any]:
        parts = self.ray.get([a.summary.remote() for a in self.actors])
        total: dict[str, Any] = {"workers": len(parts), "counts": {}, "seconds": {}}
        for part in parts:
            for what in ("counts", "seconds"):
                for k, v in part[what].items():
                    total[what][k] = round(total[what].get(k, 0) + v, 1)
        return total

    def close(self) -> None:
        try:
            self.ray.wait([a.close.remote() for a in self.actors],
                          num_returns=len(self.actors), timeout=120)
        finally:
            for actor in self.actors:
                self.ray.kill(actor)
            if self.started:
                self.ray.shutdown()


class Shipper:
    """The driver's side of moving repositories: a whole bundle per repository, taken once,
    then for a commit made after it a bundle of that commit alone (what the whole lacks)."""

    def __init__(self) -> None:
        self.taken: dict[Path, tuple[set[str], list[str]]] = {}  # commits, tips of its refs

    def whole(self, repo: Path) -> bytes:
        data = _bundle(repo, ["--all"])
        self.taken[repo] = (_reachable(repo), _heads(repo))
        return data

    def extra(self, repo: Path, commit: str) -> bytes | None:
        """None when the whole bundle holds ``commit``."""
        known, tips = self.taken[repo]
        if commit in known:
            return None
        ref = f"{SHIP_REF}/{commit}"
        run_git(repo, "update-ref", ref, commit)
        try:
            return _bundle(repo, [ref, *(f"^{tip}" for tip in tips)])
        finally:
            run_git(repo, "update-ref", "-d", ref)


def _bundle(repo: Path, revs: list[str]) -> bytes:
    with tempfile.TemporaryDirectory(prefix="repogym-bundle-") as tmp:
        path = Path(tmp) / "b.bundle"
        proc = subprocess.run(["git", "bundle", "create", "--quiet", str(path), *revs], cwd=repo,
                              capture_output=True)
        if proc.returncode != 0:
            raise TaskError(f"cannot bundle {repo} for the Ray workers: "
                            f"{proc.stderr.decode(errors='replace')[-300:]}")
        return path.read_bytes()


def _heads(repo: Path) -> list[str]:
    """The tips of a repository's branches and tags."""
    out = run_git(repo, "for-each-ref", "--format=%(objectname)", "refs/heads", "refs/tags")
    return sorted(set(out.split()))


def _reachable(repo: Path) -> set[str]:
    return set(run_git(repo, "rev-list", "--all").split())
