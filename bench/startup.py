"""Start-up: how long the command line takes to answer, next to a bare Python interpreter.

Each sample is one new process, timed from start to exit. The command line imports a
command's module only when that command runs, so `repogym --help` costs little more than
Python itself; importing the environment (Gymnasium, docker-py) is measured apart.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from repogym.bench.core import Context, Row, compare, row


def repogym_argv() -> list[str]:
    """The console script next to this interpreter, else ``python -m repogym``."""
    script = Path(sys.executable).with_name("repogym")
    return [str(script)] if script.exists() else [sys.executable, "-m", "repogym"]


def wall_ms(argv: list[str], runs: int) -> list[float]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True,
                       timeout=120)
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def startup_latency(ctx: Context, runs: int) -> list[Row]:
    ctx.progress(f"startup: {runs} runs each of python, repogym --version/--help, the env import")
    py = sys.executable
    rows = [
        row("startup.python", "`python -c pass` (the floor)", "ms",
            wall_ms([py, "-c", "pass"], runs)),
        row("startup.version", "`repogym --version`", "ms",
            wall_ms([*repogym_argv(), "--version"], runs)),
        row("startup.help", "`repogym --help`", "ms", wall_ms([*repogym_argv(), "--help"], runs)),
        row("startup.env_import", "`import repogym.envs.swe_env` (Gymnasium, docker-py)", "ms",
            wall_ms([py, "-c", "import repogym.envs.swe_env"], runs)),
    ]
    for key in ("startup.version", "startup.help", "startup.env_import"):
        rows = compare(rows, key, "startup.python")
    return rows
