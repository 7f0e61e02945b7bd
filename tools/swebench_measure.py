#!/usr/bin/env python3
"""SWE-bench Lite instances built and validated with no --env file, and the agreement of
``repogym eval --predictions`` with swebench's own ``run_instance`` on the same images.

    python tools/swebench_measure.py --out runs/lite-measure            # the default selection
    python tools/swebench_measure.py --instances pallets__flask-5063 --out /tmp/one
    python tools/swebench_measure.py --instances ... --agreement-only --out /tmp/agree

Per instance: the task from swebench's specs (``tasks add swebench`` without ``--env``), the
image build (seconds, size), validation (gold resolves and the empty patch does not, twice
each). Then four predictions per kept task, graded by repogym (``repogym eval --predictions``,
one run per kind) and by ``run_instance`` (swebench 5, network off like repogym's grading):
gold; empty (``skip_patch``, the harness's negative mode); gold with its last hunk dropped;
gold with one added line mutated. Writes ``measure.json`` and prints the tables. Sequential
on purpose: it is a measurement.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

from repogym.envs.grading.official import run_official
from repogym.images.recipe import image_info
from repogym.images.repository import ensure_image
from repogym.schema import Task
from repogym.tasks.sources.common import Rejected, SourceOptions
from repogym.tasks.sources.swebench import SwebenchOptions, SwebenchSource
from repogym.tasks.variants import KINDS, predictions

LITE = Path("/work/shared/datasets/swe-bench-lite.jsonl")
MIRRORS = Path("/work/.mirror")
DEFAULT = [
    "pallets__flask-4045", "pallets__flask-4992", "pallets__flask-5063",
    "psf__requests-863", "psf__requests-1963", "psf__requests-2148", "psf__requests-2317",
    "psf__requests-2674", "psf__requests-3362",
    "pytest-dev__pytest-5227", "pytest-dev__pytest-5692", "pytest-dev__pytest-7373",
    "pytest-dev__pytest-7432", "pytest-dev__pytest-8365", "pytest-dev__pytest-11143",
    "pylint-dev__pylint-7080", "pylint-dev__pylint-7114", "pylint-dev__pylint-7993",
    "mwaskom__seaborn-3010", "mwaskom__seaborn-3190", "mwaskom__seaborn-3407",
]
def build_and_validate(instances: list[str], runs: int, out: Path
                       ) -> tuple[list[Task], list[dict[str, Any]]]:
    file = Path("/tmp") / f"lite-{uuid.uuid4().hex[:8]}.jsonl"
    rows = [line for line in LITE.read_text().splitlines()
            if json.loads(line)["instance_id"] in set(instances)]
    file.write_text("\n".join(rows) + "\n")
    source = SwebenchSource(SwebenchOptions(file, MIRRORS, clone=False),
                            SourceOptions(runs=runs))
    kept, records = [], []
    for candidate in source.candidates():
        # what was measured so far survives an interrupted run
        (out / "records.json").write_text(json.dumps(records, indent=1) + "\n")
        rec: dict[str, Any] = {"instance_id": candidate.instance_id}
        records.append(rec)
        if isinstance(candidate, Rejected):
            rec.update(kept=False, reason=candidate.reason)
            print(f"{candidate.instance_id}: rejected: {candidate.reason}", flush=True)
            continue
        rec.update(repo=candidate.repo, python=candidate.environment.python)
        start = time.monotonic()
        try:
            built = ensure_image(candidate, progress=lambda _m: None)
        except Exception as exc:  # noqa: BLE001 - recorded: an instance that cannot be built
            rec.update(kept=False, build_s=round(time.monotonic() - start, 1),
                       reason=f"image build failed: {str(exc).splitlines()[0][:300]}")
            print(f"{candidate.instance_id}: {rec['reason']}", flush=True)
            continue
        rec.update(build_s=round(time.monotonic() - start, 1), cached=built.cached,
                   image=built.tag, size_mb=round(image_info(built.tag)["size"] / 1e6))
        start = time.monotonic()
        task, reason = source.check(candidate)
        rec.update(validate_s=round(time.monotonic() - start, 1), kept=task is not None,
                   reason=reason)
        if task is not None:
            rec.update(dropped=task.extra.get("dropped_tests") or {},
                       F2P=len(task.FAIL_TO_PASS), P2P=len(task.PASS_TO_PASS))
            kept.append(task)
        print(f"{candidate.instance_id}: {'kept' if task else 'rejected'} ({reason}); "
              f"build {rec['build_s']} s, {rec['size_mb']} MB, validate {rec['validate_s']} s",
              flush=True)
    (out / "records.json").write_text(json.dumps(records, indent=1) + "\n")
    return kept, records


def loaded(instances: list[str]) -> list[Task]:
    """The instances' tasks as the source gives them, before validation."""
    file = Path("/tmp") / f"lite-{uuid.uuid4().hex[:8]}.jsonl"
    rows = [line for line in LITE.read_text().splitlines()
            if json.loads(line)["instance_id"] in set(instances)]
    file.write_text("\n".join(rows) + "\n")
    source = SwebenchSource(SwebenchOptions(file, MIRRORS, clone=False), SourceOptions())
    return [c for c in source.candidates() if isinstance(c, Task)]


def repogym_verdicts(tasks: list[Task], preds: dict[str, dict[str, str | None]], out: Path
                     ) -> dict[tuple[str, str], bool | None]:
    from repogym.suite import write_suite

    suite = out / "suite"
    write_suite(tasks, suite, copy_sources=False)
    verdicts: dict[tuple[str, str], bool | None] = {}
    for kind in KINDS:
        rows = [{"instance_id": iid, "model_name_or_path": kind, "model_patch": p[kind]}
                for iid, p in preds.items() if p[kind] is not None]
        file = out / f"pred-{kind}.jsonl"
        file.write_text("".join(json.dumps(r) + "\n" for r in rows))
        run = out / f"eval-{kind}"
        subprocess.run([sys.executable, "-m", "repogym", "eval", "--suite", str(suite),
                        "--predictions", str(file), "--workers", "1", "--out", str(run)],
                       check=False)
        results = run / "results.jsonl"
        for line in results.read_text().splitlines() if results.exists() else []:
            row = json.loads(line)
            verdicts[(row["instance_id"], kind)] = bool(row.get("resolved"))
    return verdicts


def official_verdicts(tasks: list[Task], preds: dict[str, dict[str, str | None]], out: Path
                      ) -> dict[tuple[str, str], bool | None]:
    verdicts: dict[tuple[str, str], bool | None] = {}
    for task in tasks:
        image = ensure_image(task, progress=lambda _m: None).tag
        for kind in KINDS:
            patch = preds[task.instance_id][kind]
            if patch is None:
                continue
            try:
                result = run_official(task, image, patch if kind != "empty" else None,
                                      out / "swebench", f"{kind}-{uuid.uuid4().hex[:6]}",
                                      network_mode="none")
                verdicts[(task.instance_id, kind)] = result.resolved
            except Exception as exc:  # noqa: BLE001 - an error is a row of the table
                print(f"run_instance {task.instance_id} {kind}: {exc}", flush=True)
                verdicts[(task.instance_id, kind)] = None
    return verdicts


def print_tables(records: list[dict[str, Any]], agree: list[dict[str, Any]]) -> None:
    by_repo: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for rec in records:
        by_repo[rec.get("repo") or rec["instance_id"].split("__")[0]].append(rec)
    print("\n| repository | instances | kept | build s (median) | image MB (median) | "
          "validate s (median) |\n| --- | --- | --- | --- | --- | --- |")
    for repo, recs in sorted(by_repo.items()):
        def median(key: str, rs: list[dict[str, Any]] = recs) -> str:
            values = sorted(r[key] for r in rs if key in r and not r.get("cached"))
            values = values or sorted(r[key] for r in rs if key in r)
            return str(values[len(values) // 2]) if values else "-"
        print(f"| {repo} | {len(recs)} | {sum(bool(r.get('kept')) for r in recs)} | "
              f"{median('build_s')} | {median('size_mb')} | {median('validate_s')} |")
    for rec in records:
        if not rec.get("kept"):
            print(f"- {rec['instance_id']}: {rec.get('reason')}")
        elif rec.get("dropped"):
            print(f"- {rec['instance_id']}: {len(rec['dropped'])} tests dropped "
                  f"({next(iter(rec['dropped'].values()))})")
    print("\n| instance | " + " | ".join(KINDS) + " |\n| --- |" + " --- |" * len(KINDS))
    for row in agree:
        cells = [row.get(k, "-") for k in KINDS]
        print(f"| {row['instance_id']} | " + " | ".join(cells) + " |")
    pairs = [(r[k]) for r in agree for k in KINDS if k in r]
    same = sum(1 for c in pairs if c.startswith("="))
    print(f"\nagreement: {same}/{len(pairs)} verdicts (= same, ! differs; "
          "R resolved, - not; repogym/swebench)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--instances", default=",".join(DEFAULT))
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--no-agreement", action="store_true")
    parser.add_argument("--agreement-only", action="store_true",
                        help="instances that validated in an earlier run: their tasks as "
                             "loaded (no validation), images from the cache, then the table")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.agreement_only:
        kept, records = loaded(args.instances.split(",")), []
    else:
        kept, records = build_and_validate(args.instances.split(","), args.runs, args.out)
    agree: list[dict[str, Any]] = []
    if kept and not args.no_agreement:
        preds = {t.instance_id: predictions(t) for t in kept}
        ours = repogym_verdicts(kept, preds, args.out)
        theirs = official_verdicts(kept, preds, args.out)
        for task in kept:
            row: dict[str, Any] = {"instance_id": task.instance_id}
            for kind in KINDS:
                if (task.instance_id, kind) in theirs:
                    a, b = ours.get((task.instance_id, kind)), theirs[(task.instance_id, kind)]
                    mark = "=" if a == b else "!"
                    theirs_mark = "?" if b is None else ("R" if b else "-")
                    row[kind] = f"{mark}{'R' if a else '-'}/{theirs_mark}"
            agree.append(row)
    (args.out / "measure.json").write_text(json.dumps({"records": records, "agreement": agree},
                                                      indent=1) + "\n")
    print_tables(records, agree)
    return 0


if __name__ == "__main__":
    sys.exit(main())
