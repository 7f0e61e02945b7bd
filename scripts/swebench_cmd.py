"""`repogym swebench run|report`: a published SWE-bench file built, validated and graded whole.

    repogym swebench run swe-bench-lite.jsonl --repos MIRRORS --out runs/lite --workers 2
    repogym swebench run swe-bench-lite.jsonl --repos MIRRORS --out runs/lite --retry all
    repogym swebench report --out runs/lite
    repogym eval --suite runs/lite --agent gold --workers 2 --out runs/lite-gold

Every instance: its image (on the shared environment image of its repository and version),
validation (gold resolves it, the empty patch does not; tests that need the network or flip
are left out with the reason), and the agreement of repogym's verdict with swebench's
`run_instance` on the same image for gold, empty and the near misses the gold patch allows.
Resumable: the same command goes on where it stopped (OUT/instances/ holds one record per
instance). Writes OUT/tasks.jsonl (the kept tasks: a suite), OUT/report.json, OUT/report.md.
"""

from __future__ import annotations

import argparse
import signal
from pathlib import Path

from repogym.scripts.output import progress
from repogym.tasks.dataset_report import write_report
from repogym.tasks.dataset_run import DatasetRun, RunOptions, State, write_tasks
from repogym.tasks.variants import KINDS


def _csv(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("swebench", help="build, validate and grade a SWE-bench file whole",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ssub = p.add_subparsers(dest="swebench_command", metavar="ACTION", required=True)
    r = ssub.add_parser("run", help="every instance: image, validation, agreement (resumable)")
    r.add_argument("file", type=Path, metavar="FILE", help="the instances (JSON, JSONL, parquet)")
    r.add_argument("--out", type=Path, required=True, help="the run folder")
    r.add_argument("--repos", type=Path, default=None,
                   help="mirrors: DIR/<owner>__<name>, DIR/<owner>/<name> or "
                   "DIR/<owner>+<name>/repo")
    r.add_argument("--env", type=Path, default=None,
                   help="YAML environments by repository and version (default: swebench's "
                   "specs; see `repogym tasks add swebench --help`)")
    r.add_argument("--clone", action="store_true",
                   help="clone repositories the mirrors lack (default: refuse them, with why)")
    r.add_argument("--instances", type=_csv, default=(), help="only these instance ids")
    r.add_argument("--repo", action="append", default=[], metavar="OWNER/NAME",
                   help="only this repository's instances (repeatable)")
    r.add_argument("--workers", type=int, default=1, help="instances at once (default 1)")
    r.add_argument("--runs", type=int, default=2,
                   help="test runs per side in validation; tests that flip are dropped")
    r.add_argument("--kinds", type=_csv, default=KINDS,
                   help=f"agreement predictions (default {','.join(KINDS)}; 'none': no "
                   "agreement)")
    r.add_argument("--retry", type=_csv, default=(),
                   help="rejection kinds to try again (as report.md counts them), or all")
    r.set_defaults(func=run)
    rep = ssub.add_parser("report", help="write OUT/report.json and report.md from the records")
    rep.add_argument("--out", type=Path, required=True, help="the run folder")
    rep.add_argument("--no-disk", action="store_true", help="skip measuring the images' disk")
    rep.set_defaults(func=report)


def _stop_gracefully() -> None:
    """SIGTERM (and SIGINT, which a shell ignores in a command it started in the background
    with nohup) stop the run as Ctrl-C does: no new instance starts, those under way end."""
    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGINT, interrupt)


def run(args: argparse.Namespace) -> int:
    _stop_gracefully()
    kinds = () if args.kinds == ("none",) else args.kinds
    options = RunOptions(file=args.file, out=args.out, repos=args.repos, env=args.env,
                         instances=args.instances, repositories=tuple(args.repo),
                         workers=args.workers, runs=args.runs, kinds=kinds, retry=args.retry,
                         clone=args.clone)
    records = DatasetRun(options, log=progress).run()
    summary = write_report(args.out.resolve(), records, vars(args) | {"func": None})
    print(f"{summary['instances']} instances: {summary['kept']} kept, {summary['rejected']} "
          f"rejected, {summary['errors']} infrastructure failures; reasons: "
          + (", ".join(f"{k} ({n})" for k, n in summary["reasons"].items()) or "none"))
    print(f"suite: {args.out / 'tasks.jsonl'}  report: {args.out / 'report.md'}")
    if summary["errors"]:
        print("run the same command again to retry the infrastructure failures")
    return 1 if summary["errors"] or not summary["kept"] else 0


def report(args: argparse.Namespace) -> int:
    folder = args.out.resolve()
    state = State(folder)
    records = state.all()
    if not records:
        raise ValueError(f"{folder} holds no instance records: run `repogym swebench run` first")
    summary = write_report(folder, records, {"report_of": str(folder)}, not args.no_disk)
    suite = write_tasks(folder, records)
    print(f"{summary['instances']} instances, {summary['kept']} kept: {folder / 'report.md'}, "
          f"suite {suite}")
    return 0
