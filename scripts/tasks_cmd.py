"""`repogym tasks validate|add|certify`: checks suites, makes new tasks from repositories and
certifies them against the attack suite."""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict

from repogym.errors import TaskError
from repogym.images.repository import ensure_image
from repogym.schema import SPLITS
from repogym.scripts.output import progress, table, write_json
from repogym.scripts.tasks_add import add_tasks_add_parser
from repogym.scripts.tasks_certify import add_certify_parser
from repogym.scripts.tasks_enrich import add_enrich_parser
from repogym.suite import ALL, load_suite, select
from repogym.tasks.harbor_format import export_task
from repogym.tasks.validate import Validation, validate_task


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tasks", help="validate suites, make tasks from repositories")
    tsub = p.add_subparsers(dest="tasks_command", metavar="ACTION", required=True)
    v = tsub.add_parser("validate", help="gold resolves every task, the empty patch none")
    v.add_argument("--suite", required=True, help="suite name, .jsonl file or suite folder")
    v.add_argument("--split", default=ALL, choices=(*SPLITS, ALL),
                   help="only the tasks of this split (default: all)")
    v.add_argument("--runs", type=int, default=2, help="runs per patch (flaky tests show up)")
    v.add_argument("--workers", type=int, default=2, help="tasks validated at once (default: 2)")
    v.add_argument("--task", action="append", default=None, metavar="ID",
                   help="only this instance id (repeatable)")
    v.add_argument("--json", default=None, help="write results as JSON here (- for stdout)")
    v.set_defaults(func=validate)
    x = tsub.add_parser("export", help="write a suite's tasks in another harness's format")
    x.add_argument("format", choices=["harbor"], help="the format to write")
    x.add_argument("--suite", required=True, help="suite name, .jsonl file or suite folder")
    x.add_argument("--out", required=True, help="the folder to write task folders into")
    x.add_argument("--task", action="append", default=None, metavar="ID",
                   help="only this instance id (repeatable)")
    x.set_defaults(func=export)
    add_enrich_parser(tsub)
    add_certify_parser(tsub)
    add_tasks_add_parser(tsub)


def validate(args: argparse.Namespace) -> int:
    tasks = select(load_suite(args.suite), args.split, args.task or (),
                   where=f"suite {args.suite!r}")
    if not tasks:
        raise TaskError(f"suite {args.suite!r} holds no task: nothing to validate.")
    start = time.monotonic()
    for task in {t.repo + t.base_commit: t for t in tasks}.values():
        ensure_image(task, progress=progress)
    results: list[Validation] = []
    with ThreadPoolExecutor(max_workers=max(1, args.workers)) as pool:
        for i, res in enumerate(pool.map(lambda t: validate_task(t, runs=args.runs), tasks), 1):
            progress(f"[{i}/{len(tasks)}] {res.instance_id}: {'ok' if res.ok else res.reason}")
            results.append(res)
    rows = [
        [
            r.instance_id,
            "yes" if r.ok else "NO",
            _runs(r.gold_resolved),
            _runs(r.empty_resolved),
            len(r.flaky),
            f"{r.seconds:.1f}",
            "" if r.ok else r.reason,
        ]
        for r in results
    ]
    print(table(rows, ["task", "valid", "gold", "empty", "flaky", "seconds", "why not"]))
    bad = sum(not r.ok for r in results)
    print(f"{len(results) - bad}/{len(results)} tasks valid in {time.monotonic() - start:.0f} s")
    write_json(args.json, [asdict(r) for r in results])
    return 1 if bad else 0


def _runs(values: list[bool]) -> str:
    return "".join("R" if v else "-" for v in values)


def export(args: argparse.Namespace) -> int:
    """``repogym tasks export harbor``: one Harbor task folder per task."""
    from pathlib import Path

    tasks = select(load_suite(args.suite), ALL, args.task or (), where=f"suite {args.suite!r}")
    out = Path(args.out)
    for task in tasks:
        progress(f"{task.instance_id} -> {export_task(task, out)}")
    print(f"wrote {len(tasks)} Harbor task folders under {out}")
    return 0
