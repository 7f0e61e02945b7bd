"""Episode records: one JSON Lines file per episode, every step and the verdict."""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Any

from repogym.version import __version__


def versions(extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Versions of everything that produced a result."""
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, Any] = {"repogym": __version__, "python": platform.python_version()}
    for name in ("swebench", "gymnasium", "docker"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    try:
        from repogym.envs.sandbox.client import docker_client

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

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()


def read_record(path: str | Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
