"""A Docker engine restart in the middle of an eval: the episodes it broke run again (the
runner retries infrastructure failures) instead of being scored 0.

The restart is of a second engine started for this test (its own data, state, socket and
bridge), never of the machine's: the eval runs in a child process pointed at it."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from reliability_support import (
    REPO_ROOT,
    SecondEngine,
    child_env,
    have,
    repogym_cmd,
    wait_until,
)

from repogym.images.repository import ensure_image
from repogym.suite import load_suite

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TASKS = [f"demo__minicalc-{i}" for i in range(1, 6)]


@pytest.fixture()
def engine() -> Iterator[SecondEngine]:
    missing = [b for b in ("dockerd", "docker", "ip") if not have(b)]
    if os.geteuid() != 0 or missing:
        message = f"needs root and {', '.join(missing) or 'dockerd'} to start a second engine"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    second = SecondEngine(Path(f"/tmp/rgd-{os.getpid()}"))
    second.start()
    yield second
    second.close()


def test_a_restart_mid_eval_is_retried_not_scored(engine: SecondEngine, tmp_path: Path) -> None:
    task = next(t for t in load_suite("demo") if t.instance_id == TASKS[0])
    engine.load(ensure_image(task, progress=lambda _m: None).tag)
    out = tmp_path / "run"
    cmd = repogym_cmd("eval", "--suite", "demo", "--split", "all", "--agent", "gold",
                      "--workers", "2", "--retries", "4", "--out", str(out), "--quiet",
                      *[arg for t in TASKS for arg in ("--task", t)])
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=child_env(DOCKER_HOST=engine.host),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # restart while episodes run: containers up, results not all in
        assert wait_until(lambda: len(engine.containers()) >= 2, 120)
        time.sleep(1.0)
        engine.restart()
        restarted_at = time.monotonic()
        stdout, stderr = proc.communicate(timeout=400)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr[-3000:]
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    print(f"\nrestart: attempts {[r['attempts'] for r in rows]}, "
          f"{time.monotonic() - restarted_at:.0f} s after the restart")
    assert sorted(r["instance_id"] for r in rows) == TASKS
    assert [r for r in rows if r["error_kind"] or not r["resolved"]] == []
    assert any(r["attempts"] > 1 for r in rows), "the restart hit no episode"
    assert engine.containers() == [], "containers outlived the eval"
