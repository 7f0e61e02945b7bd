"""``repogym eval --repeat N``: every task graded N times, and how stable each verdict is.

Each repetition is an ordinary run in ``OUT/repeat-K`` (resumable like any run: the same
command goes on where it stopped). Then, per task, how many of the N runs resolved it and
whether they all agreed; a task whose verdict changed between runs is unstable, with its
count. ``OUT/stability.json`` holds it, ``OUT/summary.json`` the combined summary.

A run that failed outside the agent (``error_kind``) is no verdict and is counted apart.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any

from repogym.agents.evaluation.console import Reporter
from repogym.agents.evaluation.runner import RESULTS, SUMMARY, EvalConfig, read_results, run_eval

STABILITY = "stability.json"


def stability(runs: list[dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """Per task: the verdicts of the runs that graded it, resolved k of n, stable or not."""
    ids = sorted({iid for rows in runs for iid in rows})
    tasks: dict[str, Any] = {}
    for iid in ids:
        rows = [rows[iid] for rows in runs if iid in rows]
        graded = [bool(r.get("resolved")) for r in rows if not r.get("error_kind")]
        tasks[iid] = {"runs": len(rows), "graded": len(graded), "resolved": sum(graded),
                      "stable": len(set(graded)) <= 1,
                      "verdicts": ["R" if v else "-" for v in graded],
                      "errors": [r.get("error_kind") for r in rows if r.get("error_kind")]}
    unstable = sorted(i for i, t in tasks.items() if not t["stable"])
    rates = [sum(bool(r.get("resolved")) for r in rows.values() if not r.get("error_kind"))
             / max(1, sum(1 for r in rows.values() if not r.get("error_kind"))) for rows in runs]
    return {"repeat": len(runs), "tasks": len(tasks), "stable": len(tasks) - len(unstable),
            "unstable": {i: f"resolved in {tasks[i]['resolved']} of {tasks[i]['graded']} runs"
                         for i in unstable},
            "resolved_rate_per_run": [round(r, 4) for r in rates],
            "resolved_rate_mean": round(statistics.mean(rates), 4) if rates else None,
            "per_task": tasks}


def run_repeated(config: EvalConfig, repeat: int, progress: Reporter | None = None
                 ) -> dict[str, Any]:
    """Runs (or resumes) ``config`` ``repeat`` times and writes the stability of each
    task's verdict; returns the combined summary."""
    if repeat < 1:
        raise ValueError(f"--repeat {repeat}: give 1 or more")
    out = Path(config.out)
    summaries = []
    for k in range(1, repeat + 1):
        if progress is not None:
            progress.message(f"repeat {k} of {repeat}: {out / f'repeat-{k}'}")
        summaries.append(run_eval(replace(config, out=str(out / f"repeat-{k}")),
                                  progress=progress))
    runs = [read_results(out / f"repeat-{k}" / RESULTS) for k in range(1, repeat + 1)]
    found = stability(runs)
    out.mkdir(parents=True, exist_ok=True)
    (out / STABILITY).write_text(json.dumps(found, indent=2, sort_keys=True) + "\n")
    combined = {"out": str(out), "repeat": repeat, "runs": [s["out"] for s in summaries],
                "resolved_per_run": [s["resolved"] for s in summaries],
                "n_counted_per_run": [s["n_counted"] for s in summaries],
                "excluded": sum(len(v) for s in summaries for v in s["excluded"].values()),
                "stability": {k: v for k, v in found.items() if k != "per_task"}}
    (out / SUMMARY).write_text(json.dumps(combined, indent=2, sort_keys=True) + "\n")
    return combined


def format_stability(combined: dict[str, Any]) -> str:
    s = combined["stability"]
    lines = [f"{combined['repeat']} runs into {combined['out']}: resolved "
             + ", ".join(f"{r}/{n}" for r, n in zip(combined["resolved_per_run"],
                                                    combined["n_counted_per_run"], strict=True)),
             f"verdict stability: {s['stable']} of {s['tasks']} tasks gave the same verdict in "
             f"every run"]
    lines += [f"  unstable: {iid}: {why}" for iid, why in s["unstable"].items()]
    lines.append(f"per task: {combined['out']}/{STABILITY}")
    return "\n".join(lines)
