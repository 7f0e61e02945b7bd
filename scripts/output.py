"""Small helpers shared by the commands: JSON output and progress lines."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any


def write_json(path: str | Path | None, data: Any) -> None:
    """Writes ``data`` as JSON to ``path`` ("-" for standard output; nothing when None)."""
    if path is None:
        return
    text = json.dumps(data, indent=2, sort_keys=True, default=str)
    if str(path) == "-":
        print(text)
    else:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text + "\n")


_SPEAKING = threading.Lock()


def progress(message: str) -> None:
    """One line on standard error, whole: the workers of a command print at once (``print``
    writes the text and its newline apart, and another thread's line came between)."""
    with _SPEAKING:
        sys.stderr.write(message + "\n")
        sys.stderr.flush()


def table(rows: list[list[Any]], header: list[str]) -> str:
    cells = [header] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
