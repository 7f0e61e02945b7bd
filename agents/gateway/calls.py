"""Call records: one JSON Lines file per session, one line per model call, written as it ends.

A line holds what a trainer needs to learn from the call without re-tokenising anything:

- ``request``: the body the harness sent (``messages``, ``tools``, sampling parameters);
- ``response``: the chat completion as the harness received it (a streamed reply is
  assembled from its chunks into the same shape);
- ``status``, ``latency_s``, ``usage``, ``stream``;
- ``prompt_token_ids``, ``completion_token_ids``, ``logprobs`` when the backend returned them
  (vLLM does with ``return_token_ids`` and ``logprobs``), else ``None``;
- ``error`` when the upstream answered an error or did not answer at all.

Each line is flushed and synced before the harness gets the last byte of its answer, so a
crash loses no call that was already answered.
"""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path
from typing import Any

SESSION_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
SUFFIX = ".calls.jsonl"


def check_session(session: str) -> str:
    """A session id is also a file name: letters, digits, ``.``, ``_`` and ``-`` only."""
    if not SESSION_RE.fullmatch(session) or ".." in session:
        raise ValueError(f"session id {session!r}: use 1-200 letters, digits, '.', '_' or '-' "
                         "(starting with a letter or digit)")
    return session


def calls_path(record_dir: str | Path, session: str) -> Path:
    return Path(record_dir) / f"{check_session(session)}{SUFFIX}"


class CallStore:
    """Appends call records to ``DIR/<session>.calls.jsonl``; safe across threads."""

    def __init__(self, record_dir: str | Path) -> None:
        self.dir = Path(record_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        self._dirs: dict[str, Path] = {}

    def assign(self, session: str, record_dir: str | Path) -> Path:
        """Writes ``session``'s calls under ``record_dir`` instead (e.g. beside the episode's own
        record); returns the file's path."""
        path = calls_path(record_dir, session)
        path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            self._dirs[session] = Path(record_dir)
        return path

    def path(self, session: str) -> Path:
        return calls_path(self._dirs.get(session, self.dir), session)

    def append(self, session: str, call: dict[str, Any]) -> int:
        """Writes one call and returns its index within the session (0, 1, ...)."""
        with self._lock:
            path = calls_path(self._dirs.get(session, self.dir), session)
            index = self._counts.get(session)
            if index is None:  # a restarted gateway continues a session's numbering
                index = _count_lines(path)
            line = json.dumps({"index": index, "session": session, **call}, default=str)
            with path.open("a", encoding="utf-8") as handle:
                handle.write(line + "\n")
                handle.flush()
                os.fsync(handle.fileno())
            self._counts[session] = index + 1
        return index

    def read(self, session: str) -> list[dict[str, Any]]:
        return read_calls(self.path(session))


def read_calls(path: str | Path) -> list[dict[str, Any]]:
    """The calls of one session file; a line cut short by a crash is skipped."""
    path = Path(path)
    if not path.exists():
        return []
    calls = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            calls.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return calls


def _count_lines(path: Path) -> int:
    return len(read_calls(path))
