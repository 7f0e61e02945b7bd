"""`repogym tasks add` says in report.json what each stage cost: the checks, the gold cases,
the played gold patch and the certificate."""

from __future__ import annotations

import time

from repogym.scripts.tasks_add import Stages


def test_each_stage_has_its_seconds_and_share() -> None:
    clock = Stages()
    with clock("collect"):
        time.sleep(0.05)
    with clock("certificate"):
        time.sleep(0.03)
    clock.seconds["collect"] = 10.0  # what the checks and the gold cases took, wall time
    clock.seconds["certificate"] = 6.0
    out = clock.report(kept=4, gold_cases=2.0)
    stages = out["stages"]
    assert {k: v["seconds"] for k, v in stages.items()} == {
        "checks": 8.0, "gold_cases": 2.0, "played_gold": 0.0, "certificate": 6.0}
    assert out["total_seconds"] == 16.0 and out["seconds_per_kept"] == 4.0
    assert stages["certificate"]["share"] == 0.375
    assert sum(v["share"] for v in stages.values()) == 1.0
    # nothing kept: no seconds per kept task, no division by zero
    assert Stages().report(kept=0, gold_cases=0.0)["seconds_per_kept"] is None
