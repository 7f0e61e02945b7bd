"""Snapshots of an episode, and episodes branched from them.

``env.unwrapped.snapshot()`` returns a :class:`Snapshot`: the episode's files (what differs from
the image's pristine copy, as a tar kept on the host), the shell's working folder and exported
variables, the step count and budgets used, the undo history of the file tools and the record
so far. ``env.reset(options={"snapshot": handle})`` starts an episode from it, in this env,
another env or a vector env's workers: it takes a container that was reset in place and
verified, puts the files back and verifies them again, then sets the shell's state. Running
processes are not part of a snapshot (none of the agent's outlive a step anyway). Each branch
runs and is graded in its own container, independently of the others and of the original.

A handle pickles, and ``to_dict()`` / :meth:`Snapshot.from_dict` (or :meth:`Snapshot.save` and
:meth:`Snapshot.load`) carry it as JSON; it names the task (id and hash) and image it needs and
the folder of its files, which must be readable where it is restored (same host).
"""

from __future__ import annotations

import atexit
import json
import multiprocessing.util
import os
import shutil
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from repogym.errors import RepogymError
from repogym.sandbox import snapshot as files
from repogym.sandbox.docker import DockerSandbox
from repogym.schema import Task

_default_dir: dict[int, Path] = {}


class SnapshotError(RepogymError):
    """A snapshot cannot be taken here, or does not fit the env it is restored into."""


@dataclass(frozen=True)
class Snapshot:
    """A handle to one episode's state after ``steps`` steps."""

    id: str
    task_id: str
    task_hash: str
    image: str
    folder: str  # on the host: files.tar (the difference from the image) and record.jsonl
    files_digest: str  # the difference as the container computed it; checked after a restore
    files_sha256: str
    files_size: int
    shell: str  # the working folder and exported variables, as shell lines
    steps: int
    observation_chars: int
    seconds: float  # wall time used by the episode so far
    last_observation: str
    history: dict[str, list[str | None]]  # the file tools' undo history
    record: str | None  # the record so far (a copy), when the env records
    parent_record: str | None  # the original episode's record file
    parent: str | None  # the snapshot the episode was itself branched from
    created: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Snapshot:
        names = {f.name for f in fields(cls)}
        missing = names - set(data)
        if missing:
            raise SnapshotError(f"not a snapshot handle: {sorted(missing)} missing")
        return cls(**{k: v for k, v in data.items() if k in names})

    def save(self, path: str | Path) -> Path:
        target = Path(path)
        target.write_text(json.dumps(self.to_dict()))
        return target

    @classmethod
    def load(cls, path: str | Path) -> Snapshot:
        return cls.from_dict(json.loads(Path(path).read_text()))

    @property
    def files(self) -> files.FilesTaken:
        return files.FilesTaken(str(Path(self.folder) / "files.tar"), self.files_digest,
                                self.files_sha256, self.files_size, 0, 0)

    def delete(self) -> None:
        """Removes the snapshot's files from the host."""
        shutil.rmtree(self.folder, ignore_errors=True)


def as_snapshot(value: Any) -> Snapshot:
    """A handle from what ``reset(options={"snapshot": ...})`` got: a Snapshot, its dict, or
    the path of its JSON."""
    if isinstance(value, Snapshot):
        return value
    if isinstance(value, dict):
        return Snapshot.from_dict(value)
    if isinstance(value, (str, Path)):
        return Snapshot.load(value)
    raise SnapshotError(f"options['snapshot'] is a {type(value).__name__}: pass what "
                        "env.unwrapped.snapshot() returned, its to_dict(), or a saved JSON path")


def default_dir() -> Path:
    """This process's folder for snapshots, removed when the process exits."""
    pid = os.getpid()
    if pid not in _default_dir:
        folder = Path(tempfile.mkdtemp(prefix=f"repogym-snapshots-{pid}-"))
        _default_dir[pid] = folder
        atexit.register(_remove_own, pid, folder)
        # a multiprocessing worker (an async vector env's) ends without running atexit
        multiprocessing.util.Finalize(None, _remove_own, args=(pid, folder), exitpriority=1)
    return _default_dir[pid]


def _remove_own(pid: int, folder: Path) -> None:
    if os.getpid() == pid:  # a forked child must not remove its parent's snapshots
        shutil.rmtree(folder, ignore_errors=True)


def take(box: Any, task: Task, image: str, counters: dict[str, Any], folder: Path,
         record: Path | None, parent: str | None) -> Snapshot:
    """Snapshots a running episode; ``counters`` holds steps, observation_chars, seconds,
    last_observation and history."""
    if not isinstance(box, DockerSandbox):
        raise SnapshotError("snapshots need sandbox='docker'")
    snap_id = uuid.uuid4().hex[:12]
    where = folder / snap_id
    where.mkdir(parents=True)
    try:
        shell = files.shell_state(box)
        taken = files.capture_files(box, where / "files.tar")
        copy = None
        if record is not None and record.exists():
            copy = str(shutil.copyfile(record, where / "record.jsonl"))
    except BaseException:
        shutil.rmtree(where, ignore_errors=True)
        raise
    return Snapshot(
        id=snap_id, task_id=task.instance_id, task_hash=task.task_hash, image=image,
        folder=str(where), files_digest=taken.digest, files_sha256=taken.sha256,
        files_size=taken.size, shell=shell, record=copy,
        parent_record=str(record) if record is not None else None, parent=parent,
        created=time.time(), **counters)


def task_of(snap: Snapshot, tasks: list[Task]) -> Task:
    """The env's task the snapshot was taken on, unchanged since."""
    for task in tasks:
        if task.instance_id == snap.task_id:
            if task.task_hash != snap.task_hash:
                raise SnapshotError(f"task {snap.task_id} changed since the snapshot was taken "
                                    "(its hash differs): take a new snapshot")
            return task
    raise SnapshotError(f"task {snap.task_id} is not among this env's tasks: make the env "
                        "with the suite (and split) the snapshot was taken in")


def restore(box: Any, snap: Snapshot, image: str) -> None:
    """Puts the snapshot's files and shell state into ``box``, freshly reset; verifies both."""
    if not isinstance(box, DockerSandbox):
        raise SnapshotError("snapshots need sandbox='docker'")
    if image != snap.image:
        raise SnapshotError(f"the snapshot was taken in {snap.image}, this env has {image} for "
                            f"{snap.task_id}: the image was rebuilt; take a new snapshot")
    if not Path(snap.folder, "files.tar").exists():
        raise SnapshotError(f"the snapshot's files are gone ({snap.folder}): snapshots live "
                            "in the snapshot_dir of the process that took them, removed when "
                            "it exits unless the env was given snapshot_dir=")
    files.restore_files(box, snap.files)
    files.restore_shell(box, snap.shell)


def prefix_events(snap: Snapshot) -> list[dict[str, Any]]:
    """The steps recorded up to the snapshot, to open the branch's own record with."""
    if snap.record is None or not Path(snap.record).exists():
        return []
    lines = Path(snap.record).read_text().splitlines()
    return [e for e in (json.loads(line) for line in lines if line.strip())
            if e.get("event") == "step"]
