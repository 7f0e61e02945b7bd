"""Does agreement with the gold code give credit where the tests give it? A rerunnable
measurement over a suite with gold cases (``repogym tasks enrich`` or ``tasks add``):

    python -m repogym.scripts.measure_dense --suite DIR [--mutants 4] [--out FILE.json]

For every task with gold cases it grades, in Docker and one at a time, the gold patch, the
empty patch and partial patches: the gold patch with one hunk dropped (patches of two hunks or
more), and mutants of the gold code (one rewrite of ``repogym.tasks.sources.mutate`` in a
function the gold patch changes). It prints, per task and in all: whether the gold patch
agrees on every discriminating input and the empty patch on none, where partial patches fall,
Spearman's rank correlation between their agreement and their FAIL_TO_PASS pass rate (and
with the regression inputs counted too), and the seconds the differential step adds to a
grading.
"""

from __future__ import annotations

import argparse
import difflib
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from repogym.envs.grading.grader import Grader, GraderConfig
from repogym.images.repository import ensure_image
from repogym.repo import export_tree
from repogym.schema import Task
from repogym.scripts.output import progress, table, write_json
from repogym.suite import load_suite
from repogym.tasks.sources import mutate, pyast
from repogym.tasks.sources.enrich import gold_cases
from repogym.tasks.sources.gold_targets import changed_functions, patch_paths


def drop_hunks(patch: str) -> list[str]:
    """The patch once without each of its hunks (none for a patch of one hunk)."""
    from unidiff import PatchSet

    files = PatchSet(patch)
    total = sum(len(f) for f in files)
    if total < 2:
        return []
    out = []
    for skip in range(total):
        parts, i = [], 0
        for patched in files:
            kept = []
            for hunk in patched:
                if i != skip:
                    kept.append(str(hunk))
                i += 1
            if kept:
                header = str(patched).split("\n@@", 1)[0].rstrip("\n") + "\n"
                parts.append(header + "".join(kept))
        out.append("".join(parts))
    return out


def file_diff(path: str, before: str, after: str) -> str:
    lines = difflib.unified_diff(before.splitlines(True), after.splitlines(True),
                                 f"a/{path}", f"b/{path}")
    return f"diff --git a/{path} b/{path}\n" + "".join(lines)


def gold_mutants(task: Task, count: int, seed: int) -> list[tuple[str, str]]:
    """Up to ``count`` (label, patch): the gold patch with one mutation in a function it
    changes, each a patch against the base code (a seeded sample)."""
    paths = patch_paths(task.patch)
    with tempfile.TemporaryDirectory(prefix="repogym-measure-") as tmp:
        tree = Path(tmp) / "tree"
        export_tree(str(task.source), task.base_commit, tree)
        before = {p: (tree / p).read_text() if (tree / p).exists() else None for p in paths}
        subprocess.run(["git", "apply", "--whitespace=nowarn", "-"], cwd=tree, check=True,
                       input=task.patch.encode(), capture_output=True)
        after = {p: (tree / p).read_text() if (tree / p).exists() else None for p in paths}
    found: list[tuple[str, str]] = []
    for path, names in changed_functions(task.patch, before, after).items():
        text = after[path] or ""
        for definition in pyast.definitions(pyast.parse(text)):
            if definition.qualname not in names or definition.is_class:
                continue
            for m in mutate.function_mutations(path, text, definition, tuple(mutate.OPERATORS)):
                mutated = mutate.verify(text, m)
                if mutated is not None:
                    label = f"mutant {m.qualname}:{m.line} {m.operator}"
                    found.append((label, file_diff(path, before[path] or "", mutated)))
    random.Random(seed).shuffle(found)
    return found[:count]


def ranks(values: list[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(x: list[float], y: list[float]) -> float | None:
    """Spearman's rho (ties share their mean rank); None when either side is constant."""
    if len(x) < 3 or len(set(x)) < 2 or len(set(y)) < 2:
        return None
    return round(statistics.correlation(ranks(x), ranks(y)), 3)


def measure_task(task: Task, grader: Grader, mutants: int, seed: int) -> dict[str, Any]:
    image = ensure_image(task, progress=progress).tag
    variants = [("gold", task.patch), ("empty", "")]
    variants += [(f"hunk {i + 1} dropped", p) for i, p in enumerate(drop_hunks(task.patch))]
    variants += gold_mutants(task, mutants, seed)
    rows = []
    for label, patch in variants:
        report = grader.grade(task, patch, image)
        diff = report.differential or {}
        rows.append({"variant": label, "f2p": round(report.f2p_pass_rate, 4),
                     "p2p": round(report.p2p_pass_rate, 4), "resolved": report.resolved,
                     "agreement": diff.get("agreement"),
                     "regression_agreement": diff.get("regression_agreement"),
                     "all_agreement": round(diff["agreed"] / diff["cases"], 4)
                     if diff.get("cases") else None,
                     "diff_seconds": diff.get("seconds", 0.0),
                     "grade_seconds": round(report.total_seconds, 3)})
        progress(f"  {task.instance_id} {label}: agreement {diff.get('agreement')}, "
                 f"F2P {report.f2p_pass_rate:.2f}")
    partial = [r for r in rows if r["variant"] not in ("gold", "empty")]
    return {"instance_id": task.instance_id, "rows": rows,
            "gold_agreement": rows[0]["agreement"], "empty_agreement": rows[1]["agreement"],
            "spearman": spearman([r["agreement"] or 0.0 for r in partial],
                                 [r["f2p"] for r in partial]),
            "diff_seconds": round(statistics.mean(r["diff_seconds"] for r in rows), 3),
            "grade_seconds": round(statistics.mean(r["grade_seconds"] for r in rows), 3)}


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    partial = [r for t in results for r in t["rows"] if r["variant"] not in ("gold", "empty")]
    per_task = [t["spearman"] for t in results if t["spearman"] is not None]
    return {
        "tasks": len(results),
        "gold_1": sum(t["gold_agreement"] == 1.0 for t in results),
        "empty_0": sum(t["empty_agreement"] == 0.0 for t in results),
        "partial": len(partial),
        "partial_between": sum(0.0 < (r["agreement"] or 0.0) < 1.0 for r in partial),
        "spearman_pooled": spearman([r["agreement"] or 0.0 for r in partial],
                                    [r["f2p"] for r in partial]),
        "spearman_per_task_mean": round(statistics.mean(per_task), 3) if per_task else None,
        # the same with the regression inputs counted too (agreed / all cases)
        "spearman_all_cases_pooled": spearman([r["all_agreement"] or 0.0 for r in partial],
                                              [r["f2p"] for r in partial]),
        "tasks_with_spearman": len(per_task),
        "diff_seconds_mean": round(statistics.mean(t["diff_seconds"] for t in results), 3)
        if results else None,
        "grade_seconds_mean": round(statistics.mean(t["grade_seconds"] for t in results), 3)
        if results else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", required=True, help="a suite with gold cases")
    parser.add_argument("--mutants", type=int, default=4, help="mutants of the gold code per task")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds per test run (a mutant that loops must not take the "
                        "task's whole limit)")
    parser.add_argument("--task", action="append", default=None, help="only these ids")
    parser.add_argument("--out", default=None, help="write every figure as JSON here")
    args = parser.parse_args(argv)
    tasks = [t for t in load_suite(args.suite) if gold_cases(t)
             and (not args.task or t.instance_id in args.task)]
    if not tasks:
        print(f"no task of {args.suite} has gold cases: run `repogym tasks enrich` first",
              file=sys.stderr)
        return 1
    grader = Grader(GraderConfig(cleanup_async=False, timeout=args.timeout), seed=args.seed)
    start = time.monotonic()
    results = [measure_task(t, grader, args.mutants, args.seed) for t in tasks]
    print(table([[t["instance_id"], t["gold_agreement"], t["empty_agreement"],
                  " ".join(f"{r['agreement']}/{r['f2p']:.2f}" for r in t["rows"][2:]) or "-",
                  t["spearman"] if t["spearman"] is not None else "-",
                  f"{t['diff_seconds']:.2f}", f"{t['grade_seconds']:.2f}"] for t in results],
                ["task", "gold", "empty", "partial: agreement/F2P", "rho", "diff s", "grade s"]))
    summary = summarize(results)
    print(json.dumps(summary))
    print(f"{len(tasks)} tasks measured in {time.monotonic() - start:.0f} s")
    write_json(args.out, {"suite": args.suite, "summary": summary, "tasks": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
