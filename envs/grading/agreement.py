"""Agreement of a candidate with the reference code, scored on the host.

The harness (:mod:`repogym.envs.grading.differential`) runs in the grading container on the
recorded inputs and prints one canonical encoding per call; this module puts it there, reads
what it printed, and compares with the reference's outcomes, which never enter the container.
Two kinds of cases: a replication task's (``task.reference["cases"]``, the removed code's
outcomes) and any task's gold cases (``task.extra["gold_cases"]``, the gold patch's outcomes
on inputs where it differs from the base code, and on a sample where it does not; see
:mod:`repogym.tasks.sources.enrich`).
"""

from __future__ import annotations

import json
import time
from typing import Any

from repogym.envs.grading import differential
from repogym.envs.grading.differential import DIR, MARK, OUTPUT_LIMIT, same
from repogym.sandbox.base import HarnessSandbox
from repogym.schema import Task


def parse_outcomes(output: str) -> dict[str, tuple[Any, float]]:
    """Outcome and the call's CPU seconds per case id; an id printed twice counts as an
    error."""
    found: dict[str, tuple[Any, float]] = {}
    for line in output.split("\n"):
        _, mark, payload = line.partition(MARK)
        if not mark:
            continue
        try:
            item = json.loads(payload)
            key, outcome, seconds = str(item["id"]), item["out"], float(item["s"])
        except (ValueError, KeyError, TypeError):
            continue
        found[key] = (["error", "duplicate"], seconds) if key in found else (outcome, seconds)
    return found


def harness_source() -> bytes:
    with open(differential.__file__, "rb") as f:
        return f.read()


def call_cases(box: HarnessSandbox, functions: dict[str, Any], cases: list[dict[str, Any]],
               call_timeout: float, timeout: float) -> tuple[dict[str, tuple[Any, float]], str]:
    """Runs the harness in ``box`` on ``cases`` (``fn``, ``args``,
    ``kwargs``; ids are their indexes) as its unprivileged user; returns the outcomes by id
    and a note when the run did not finish."""
    inputs = {"functions": functions, "call_timeout": call_timeout,
              "cases": [{"id": str(i), "fn": c["fn"], "args": c["args"],
                         "kwargs": c.get("kwargs", {})} for i, c in enumerate(cases)]}
    sub = DIR.removeprefix("/opt/")
    box.put_files({f"{sub}/differential.py": harness_source(),
                   f"{sub}/inputs.json": json.dumps(inputs).encode()}, "/opt")
    result = box.exec(["env", "PYTHONDONTWRITEBYTECODE=1", "PYTHONHASHSEED=0", "python",
                       f"{DIR}/differential.py", f"{DIR}/inputs.json"],
                      timeout=timeout, limit=OUTPUT_LIMIT)
    note = ""
    if result.timed_out:
        note = f"the harness hit its {timeout:.0f} s limit"
    elif result.exit_code != 0:
        note = f"the harness exited {result.exit_code}"
    return parse_outcomes(result.output), note


def score(cases: list[dict[str, Any]], outcomes: dict[str, tuple[Any, float]]
          ) -> dict[str, Any]:
    """Agreement per function (agreeing cases / cases) and overall (their mean)."""
    per: dict[str, list[int]] = {}
    missing = timeouts = 0
    for i, case in enumerate(cases):
        got = outcomes.get(str(i))
        missing += got is None
        timeouts += got is not None and got[0] == ["timeout"]
        counts = per.setdefault(case["fn"], [0, 0])
        counts[0] += int(got is not None and same(case["expect"], got[0]))
        counts[1] += 1
    functions = {fn: {"agreement": round(a / n, 4), "agreed": a, "cases": n}
                 for fn, (a, n) in sorted(per.items())}
    overall = sum(a / n for a, n in per.values()) / len(per) if per else 0.0
    return {"agreement": round(overall, 4), "functions": functions, "cases": len(cases),
            "agreed": sum(a for a, _ in per.values()), "missing": missing, "timeouts": timeouts}


def score_gold(cases: list[dict[str, Any]], outcomes: dict[str, tuple[Any, float]]
               ) -> dict[str, Any]:
    """``agreement``: the share of discriminating cases with the gold outcome (None without
    any); ``regression_agreement``: the same over the regression cases; and per function, the
    discriminating cases agreed."""
    counts = {"discriminating": [0, 0], "regression": [0, 0]}
    per: dict[str, list[int]] = {}
    missing = timeouts = 0
    for i, case in enumerate(cases):
        got = outcomes.get(str(i))
        missing += got is None
        timeouts += got is not None and got[0] == ["timeout"]
        ok = int(got is not None and same(case["expect"], got[0]))
        counts[case["set"]][0] += ok
        counts[case["set"]][1] += 1
        if case["set"] == "discriminating":
            pair = per.setdefault(case["fn"], [0, 0])
            pair[0] += ok
            pair[1] += 1
    (d_ok, d_n), (r_ok, r_n) = counts["discriminating"], counts["regression"]
    return {"kind": "gold", "agreement": round(d_ok / d_n, 4) if d_n else None,
            "regression_agreement": round(r_ok / r_n, 4) if r_n else None,
            "discriminating": d_n, "regression": r_n, "cases": len(cases),
            "agreed": d_ok + r_ok, "missing": missing, "timeouts": timeouts,
            "functions": {fn: {"agreement": round(a / n, 4), "agreed": a, "cases": n}
                          for fn, (a, n) in sorted(per.items())}}


def run_differential(box: HarnessSandbox, task: Task,
                     timeout: float = 30.0) -> dict[str, Any] | None:
    """Scores the code in ``box`` against the task's recorded cases (a replication task's
    own, else its gold cases); None for tasks without any. ``box`` is a grading container
    after its test run."""
    recorded = (task.reference or {}).get("cases") if task.kind == "replication" else None
    if not recorded or not recorded.get("cases"):
        return run_gold_cases(box, task, timeout)
    start = time.monotonic()
    outcomes, note = call_cases(box, recorded["functions"], recorded["cases"],
                                float(recorded.get("call_timeout", 2.0)), timeout)
    result = score(recorded["cases"], outcomes)
    result["seconds"] = round(time.monotonic() - start, 3)
    if note:
        result["note"] = note
    return result


def run_gold_cases(box: HarnessSandbox, task: Task,
                   timeout: float = 30.0) -> dict[str, Any] | None:
    """:func:`score_gold` of the code in ``box`` on the task's gold cases; None without."""
    recorded = task.extra.get("gold_cases")
    if not isinstance(recorded, dict) or not recorded.get("cases"):
        return None
    start = time.monotonic()
    outcomes, note = call_cases(box, recorded["functions"], recorded["cases"],
                                float(recorded.get("call_timeout", 2.0)), timeout)
    result = score_gold(recorded["cases"], outcomes)
    result["seconds"] = round(time.monotonic() - start, 3)
    if note:
        result["note"] = note
    return result
