"""Episode records: one JSON Lines file per episode, every step and the verdict."""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Any

from repogym.errors import UsageError
from repogym.version import describe as repogym_version


def versions(extra: dict[str, Any] | None = None, engine: bool = True) -> dict[str, Any]:
    """Versions of everything that produced a result; with ``engine``, the Docker engine's
    too (asked here: an env's backend gives its own instead)."""
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, Any] = {"repogym": repogym_version(), "python": platform.python_version()}
    for name in ("swebench", "gymnasium", "docker"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    if engine:
        try:
            # the Docker SDK only to ask the engine: reading records (`repogym show`) needs none
            from repogym.sandbox.client import docker_client

            out["docker_engine"] = docker_client().version().get("Version")
        except Exception:  # noqa: BLE001 - a record without the engine version is still useful
            out["docker_engine"] = None
    return {**out, **(extra or {})}


class EpisodeRecorder:
    """Appends one JSON object per line: ``reset``, each ``step``, then ``end``."""

    def __init__(self, record_dir: str | Path, task_id: str, episode: int, run_id: str = ""):
        self.dir = Path(record_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%dT%H%M%S")
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in task_id)
        self.path = self.dir / f"{stamp}-{safe}-{run_id or os.getpid()}-{episode:05d}.jsonl"
        self._file = self.path.open("a", encoding="utf-8")

    def write(self, event: str, **data: Any) -> None:
        # ASCII JSON: observations may hold bytes that are not UTF-8 (surrogate escapes)
        line = json.dumps({"event": event, "time": time.time(), **data}, default=str)
        self._file.write(line + "\n")
        self._file.flush()

    def copy(self, events: list[dict[str, Any]]) -> None:
        """Appends events recorded elsewhere as they were (a branch's steps before its fork)."""
        for event in events:
            self._file.write(json.dumps({**event, "copied": True}, default=str) + "\n")
        self._file.flush()

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()


EVENTS = ("reset", "step", "end")
WHERE = ("records are the .jsonl files under the env's record_dir, or under DIR/records of a "
         "`repogym eval` run")


def read_record(path: str | Path) -> list[dict[str, Any]]:
    """The events of one episode record; :class:`UsageError` when ``path`` is not one."""
    path = Path(path)
    if path.is_dir():
        inside = sorted(path.glob("*.jsonl"))[:1]
        hint = f", e.g. {inside[0]}" if inside else ""
        raise UsageError(f"{path} is a folder: give one record file in it{hint}.")
    if not path.is_file():
        raise UsageError(f"{path} does not exist: {WHERE}.")
    events: list[dict[str, Any]] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise UsageError(f"{path} is not an episode record (not text): {WHERE}.") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            raise UsageError(f"{path} is not an episode record (line {n} is not JSON): "
                             f"{WHERE}.") from None
        if not isinstance(event, dict) or event.get("event") not in EVENTS:
            what = ("a results file" if isinstance(event, dict) and "instance_id" in event
                    else "not an episode record")
            raise UsageError(f"{path} is {what} (line {n} is no reset, step or end event): "
                             f"{WHERE}.")
        events.append(event)
    if not events:
        raise UsageError(f"{path} is empty: {WHERE}.")
    return events
