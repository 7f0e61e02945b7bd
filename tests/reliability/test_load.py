"""Load: 200 episodes, 4 environments at once, gold and random agents mixed.

Nothing may leak (containers), nothing may escape (exceptions in any thread, error rows), and
the gold agent's results must be identical on every episode of the same task.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path

import pytest
from reliability_support import (
    base_id,
    plays_gold,
    replicas,
    run_containers,
    thread_exceptions,
    wait_until,
)

from repogym.agents.evaluation.runner import EvalConfig, run_eval
from repogym.suite import load_suite

pytestmark = [pytest.mark.docker, pytest.mark.slow]

EPISODES = 200
WORKERS = 4


def verdict(row: dict) -> str:
    """What must not change between gold episodes of one task (timings left out)."""
    return json.dumps([row["resolved"], row["reward"], row["reward_components"], row["flags"],
                       row["truncation"], row["error_kind"]], sort_keys=True)


@pytest.mark.timeout(1800)  # a few minutes on 2 idle cores; far longer on a busy machine
def test_200_mixed_episodes_on_4_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_id = f"load{int(time.time()) % 100000}"
    monkeypatch.setenv("REPOGYM_RUN_ID", run_id)
    tasks = replicas(load_suite("demo"), EPISODES)
    config = EvalConfig(suite="demo", agent="reliability_support:MixedAgent", workers=WORKERS,
                        out=str(tmp_path / "run"), max_steps=10, record=False)
    start = time.monotonic()
    with thread_exceptions() as escaped:
        summary = run_eval(config, tasks=tasks)
        assert wait_until(lambda: not run_containers(run_id), 60), run_containers(run_id)
    seconds = time.monotonic() - start
    rows = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text()
            .splitlines()]
    print(f"\nload: {len(rows)} episodes, {WORKERS} workers, {seconds:.0f} s "
          f"({summary['tasks_per_minute']:.1f} episodes/min), leaked 0, escaped {len(escaped)}")
    assert escaped == []
    assert len(rows) == EPISODES and summary["n_missing"] == 0
    errors = [(r["instance_id"], r["error_kind"], r["error"]) for r in rows if r["error_kind"]]
    assert errors == []
    gold: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        if plays_gold(row["instance_id"]):
            gold[base_id(row["instance_id"])].add(verdict(row))
    assert len(gold) == len(load_suite("demo"))
    assert {k: v for k, v in gold.items() if len(v) != 1} == {}
    assert all(json.loads(next(iter(v)))[0] for v in gold.values()), gold
