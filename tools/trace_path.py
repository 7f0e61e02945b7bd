"""Follows one task from ``repogym eval`` to its reward and counts the package files it passes.

    .venv/bin/python tools/trace_path.py [--suite demo] [--task demo__textkit-1]

Runs ``repogym eval --agent gold`` on one task in this process (its image built beforehand, so
that building is not counted) with a profiler on every thread. Every call from one file of the
package into another is a *visit*; a visit to a file already visited earlier (other than the
one just left) is a *return*; two files that call each other are a *pair* (a call back up,
or two files that share one idea). Prints the files visited, the returns, the pairs, and the
files visited most often: a path that reads top to bottom has no pairs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

import repogym.envs

ROOT = Path(repogym.envs.__file__).resolve().parents[1]  # the checkout the package runs from


class Tracer:
    def __init__(self) -> None:
        self.visits: list[str] = []
        self.edges: set[tuple[str, str]] = set()
        self.lock = threading.Lock()

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        callee = frame.f_code.co_filename
        caller = frame.f_back.f_code.co_filename if frame.f_back else ""
        if callee == caller or not self.ours(callee) or not self.ours(caller):
            return
        with self.lock:
            self.visits.append(self.short(callee))
            self.edges.add((self.short(caller), self.short(callee)))

    @staticmethod
    def ours(path: str) -> bool:
        return path.startswith(str(ROOT)) and "/.venv/" not in path and "/tools/" not in path

    @staticmethod
    def short(path: str) -> str:
        return Path(path).relative_to(ROOT).as_posix()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", default="demo")
    parser.add_argument("--task", default="demo__textkit-1")
    args = parser.parse_args()
    from repogym.scripts.cli import main as cli  # after the arguments: start-up only

    cli(["images", "build", "--suite", args.suite])
    tracer = Tracer()
    with tempfile.TemporaryDirectory() as out:
        threading.setprofile(tracer)
        sys.setprofile(tracer)
        try:
            cli(["eval", "--suite", args.suite, "--agent", "gold", "--task", args.task,
                 "--workers", "1", "--out", out])
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]
    seen: set[str] = set()
    returns = 0
    last = ""
    for path in tracer.visits:
        if path in seen and path != last:
            returns += 1
        seen.add(path)
        last = path
    both = sorted({tuple(sorted(e)) for e in tracer.edges if e[::-1] in tracer.edges})
    print(f"files visited: {len(seen)}; calls between files {len(tracer.visits)} over "
          f"{len(tracer.edges)} distinct caller-callee pairs; returns to a file already left: "
          f"{returns}; pairs of files that call each other: {len(both)}")
    for a, b in both:
        print(f"  {a} <-> {b}")
    for path, n in Counter(tracer.visits).most_common(12):
        print(f"  {n:5d}  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
