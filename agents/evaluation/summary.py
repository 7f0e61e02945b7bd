"""From result rows to a summary: resolved rate with its confidence interval, means, failures.

Rows whose episode failed for reasons outside the agent (``error_kind`` ``"infrastructure"``:
the Docker engine, a sandbox, an image build or the grader; ``"task"``: a malformed task;
``"internal"``: a bug in the environment) are left out of the resolved rate and counted apart,
so a broken machine never reads as an agent that scored 0.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable
from typing import Any, Literal, cast, get_args

Z95 = 1.959963984540054  # two-sided 95% quantile of the standard normal
EXCLUDED_KINDS = ("infrastructure", "task", "internal")
# why a row did not resolve its task: the episode's exception (``agent_error`` and the excluded
# kinds), or what its grading showed
FailureKind = Literal["infrastructure", "task_error", "internal_error", "agent_error",
                      "truncated", "empty_patch", "not_graded", "invalid_run", "tests_tampered",
                      "patch_failed", "tests_failed"]
FAILURE_KINDS: tuple[FailureKind, ...] = get_args(FailureKind)


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (Wilson 1927).

    Unlike the normal approximation it stays inside [0, 1] and is sensible at 0/n and n/n,
    which small suites hit all the time. ``n == 0`` gives the uninformative (0, 1).
    """
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # at 0/n and n/n one end is exactly 0 or 1; rounding would leave it a hair off
    lo = 0.0 if successes == 0 else max(0.0, centre - half)
    hi = 1.0 if successes == n else min(1.0, centre + half)
    return lo, hi


def failure_kind(row: dict[str, Any]) -> FailureKind | None:
    """Why a row did not resolve its task (None when it did)."""
    if row.get("error_kind"):
        kind = str(row["error_kind"])
        # an episode's ErrorKind; a results file's unknown kind passes through as it was
        return cast(FailureKind, kind if kind == "infrastructure" else f"{kind}_error")
    if row.get("resolved"):
        return None
    comps = row.get("reward_components") or {}
    if row.get("truncation"):
        return "truncated"
    if not comps:
        return "empty_patch" if row.get("empty_patch") else "not_graded"
    if comps.get("invalid"):
        return "invalid_run"
    if comps.get("tests_tampered"):
        return "tests_tampered"
    if not comps.get("patch_applied"):
        return "patch_failed" if "patch_failed" in (row.get("flags") or []) else "empty_patch"
    return "tests_failed"


def counted(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows that count toward the resolved rate."""
    return [r for r in rows if r.get("error_kind") not in EXCLUDED_KINDS]


def rate(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Resolved count, rate and 95% Wilson interval of ``rows`` (already filtered)."""
    k, n = sum(bool(r.get("resolved")) for r in rows), len(rows)
    lo, hi = wilson_interval(k, n)
    return {"n": n, "resolved": k, "rate": k / n if n else None, "ci95": [lo, hi]}


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    low, high = math.floor(pos), math.ceil(pos)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def summarize(rows: list[dict[str, Any]], wall_seconds: float | None = None,
              n_run: int | None = None) -> dict[str, Any]:
    """The summary of a whole run (``summary.json``).

    ``wall_seconds`` and ``n_run`` describe this invocation (a resumed run skips finished
    tasks), and give its throughput.
    """
    kept = counted(rows)
    overall = rate(kept)
    comps: dict[str, list[float]] = {}
    for row in kept:
        for name, value in (row.get("reward_components") or {}).items():
            comps.setdefault(name, []).append(float(value))
    totals = [float(r["timings"]["total"]) for r in rows if (r.get("timings") or {}).get("total")]
    failures = Counter(k for r in rows if (k := failure_kind(r)))
    return {
        "n_tasks": len(rows),
        "n_counted": overall["n"],
        "resolved": overall["resolved"],
        "resolved_rate": overall["rate"],
        "resolved_ci95": overall["ci95"],
        "mean_reward": statistics.fmean(float(r.get("reward") or 0.0) for r in kept)
        if kept else None,
        "mean_components": {k: statistics.fmean(v) for k, v in sorted(comps.items())},
        "failures": dict(sorted(failures.items())),
        "excluded": {kind: sorted(r["instance_id"] for r in rows if r.get("error_kind") == kind)
                     for kind in EXCLUDED_KINDS},
        "by_repo": _grouped(kept, "repo"),
        "by_kind": _grouped(kept, "kind"),
        "timings": {"mean": statistics.fmean(totals) if totals else None,
                    "median": percentile(totals, 0.5), "p90": percentile(totals, 0.9),
                    "sum": sum(totals)},
        "wall_seconds": wall_seconds,
        "n_run": n_run,
        "tasks_per_minute": (60.0 * n_run / wall_seconds)
        if wall_seconds and n_run is not None else None,
    }


def _grouped(rows: list[dict[str, Any]], key: str) -> dict[str, Any]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(str(row.get(key) or "?"), []).append(row)
    return {name: rate(group) for name, group in sorted(groups.items())}
