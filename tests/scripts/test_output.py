"""Progress lines from the workers of one command."""

from __future__ import annotations

import io
import sys
import threading

import pytest

from repogym.scripts.output import progress


def test_progress_lines_from_many_threads_stay_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """`repogym swebench run`'s two workers and its main thread printed at once, and a line
    ran into the next one (`sympy__sympy-24152: building[5/40] sympy__sympy-15308: kept`)."""
    stream = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
    monkeypatch.setattr(sys, "stderr", stream)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads take turns as often as they can
    start = threading.Barrier(8)

    def speak(n: int) -> None:
        start.wait()
        for i in range(400):
            progress(f"worker {n}: line {i}")

    threads = [threading.Thread(target=speak, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    sys.setswitchinterval(interval)
    lines = stream.buffer.getvalue().decode().splitlines()  # type: ignore[attr-defined]
    assert sorted(lines) == sorted(f"worker {n}: line {i}" for n in range(8) for i in range(400))
