"""`repogym tasks enrich --suite S --out DIR`: adds gold cases (differential testing against
the gold patch, see :mod:`repogym.tasks.sources.enrich`) to the tasks of a suite, and writes
the suite again as a folder (``DIR/tasks.jsonl``, the repositories under ``DIR/repos``,
``DIR/report.json``). A task where nothing can be traced is written as it was."""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from repogym.errors import DockerUnavailable, RepogymError
from repogym.images.repository import ensure_image
from repogym.sandbox.client import docker_available
from repogym.schema import SPLITS, Task
from repogym.scripts.output import progress, table, write_json
from repogym.suite import ALL, load_suite, select, write_suite
from repogym.tasks.sources.enrich import EnrichConfig, gold_cases, gold_recorder, why_not
from repogym.tls import explain_certificate


def add_enrich_parser(subparsers: Any) -> None:
    e = subparsers.add_parser("enrich", help="add differential cases traced from the gold code")
    e.add_argument("--suite", required=True, help="a suite name, .jsonl file or folder")
    e.add_argument("--out", type=Path, required=True, help="the suite folder to write")
    e.add_argument("--split", default=ALL, choices=(*SPLITS, ALL),
                   help="record only the tasks of this split (default: all; the others are "
                   "written unchanged)")
    e.add_argument("--task", action="append", default=None, metavar="ID",
                   help="record only this instance id (repeatable; the others are written "
                   "unchanged)")
    d = EnrichConfig()
    e.add_argument("--max-discriminating", type=int, default=d.max_discriminating,
                   help="discriminating cases kept per task")
    e.add_argument("--max-regression", type=int, default=d.max_regression,
                   help="regression cases kept per task")
    e.add_argument("--max-candidates", type=int, default=d.max_candidates,
                   help="inputs tried per task")
    e.add_argument("--seed", type=int, default=d.seed, help="fixes which inputs are tried")
    e.set_defaults(func=enrich)


def enrich(args: argparse.Namespace) -> int:
    config = EnrichConfig(max_discriminating=args.max_discriminating,
                          max_regression=args.max_regression,
                          max_candidates=args.max_candidates, seed=args.seed)
    tasks = load_suite(args.suite)
    wanted = {t.instance_id for t in select(tasks, args.split, args.task or (),
                                            where=f"suite {args.suite!r}")}
    if not docker_available():
        raise DockerUnavailable("`tasks enrich` records the gold code's behaviour in containers")
    record = gold_recorder(config)
    out: list[Task] = list(tasks)
    rows: list[dict[str, Any]] = []
    start, code, failed = time.monotonic(), 0, 0
    try:
        for i, task in enumerate(tasks):
            if task.instance_id not in wanted:
                continue
            t0 = time.monotonic()
            try:
                if why_not(task) is None:
                    ensure_image(task, progress=progress)
                out[i], note = record(task)
            except RepogymError as exc:  # this task's image: the others may still build
                failed += 1
                said = explain_certificate(str(exc)) or str(exc).splitlines()[0][:200]
                note = f"no gold cases: {said}"
            seconds = time.monotonic() - t0
            rows.append(_row(out[i], note, seconds))
            progress(f"[{len(rows)}/{len(wanted)}] {task.instance_id}: {note} ({seconds:.0f} s)")
    except KeyboardInterrupt:
        progress("interrupted: writing the tasks enriched so far")
        code = 130
    path = write_suite(out, args.out)
    write_json(args.out / "report.json", {"config": asdict(config), "suite": str(args.suite),
                                          "seconds": round(time.monotonic() - start, 1),
                                          "tasks": rows})
    print(table([[r["instance_id"], r["discriminating"], r["regression"], r["scope"],
                  f"{r['seconds']:.0f}", r["note"] if not r["discriminating"] else ""]
                 for r in rows],
                ["task", "discriminating", "regression", "scope", "seconds", "why none"]))
    with_cases = sum(bool(r["discriminating"]) for r in rows)
    print(f"{with_cases}/{len(rows)} tasks with gold cases in "
          f"{time.monotonic() - start:.0f} s; suite: {path}", file=sys.stdout)
    if failed and not code:
        print(f"{failed} tasks could not be recorded: their images did not build (see 'why "
              "none'); the suite keeps them as they were", file=sys.stderr)
        return 1
    return code


def _row(task: Task, note: str, seconds: float) -> dict[str, Any]:
    cases = gold_cases(task) or {"cases": [], "scope": "", "functions": {}}
    counts = {s: sum(c["set"] == s for c in cases["cases"]) for s in
              ("discriminating", "regression")}
    return {"instance_id": task.instance_id, **counts, "scope": cases["scope"],
            "functions": sorted(cases["functions"]), "note": note,
            "seconds": round(seconds, 1)}
