#!/usr/bin/env python3
"""Seconds per tried and per kept candidate of ``repogym tasks add``, and whether the lists
of a selective run are those full runs give.

    # one timed run (any repogym: this checkout's, or another one's to compare with)
    python tools/measure_creation.py run --label after --out runs/creation -- \\
        synthetic /work/.mirror/more-itertools+more-itertools/repo --max 25
    python tools/measure_creation.py run --label before \\
        --repogym /path/to/old/.venv/bin/repogym --out runs/creation -- synthetic PATH --max 5

    # every candidate of a run checked again the old way (own image, full runs): same lists?
    python tools/measure_creation.py lists runs/creation/after-1 --max 10

    # two runs over the same candidates (same --seed and --max): same outcomes and lists?
    python tools/measure_creation.py compare runs/creation/after-1 runs/creation/before-1

    # the benchmarks page's table from every run recorded
    python tools/measure_creation.py table runs/creation

``run`` appends one JSON line to ``OUT/results.jsonl``: the command, the repogym it ran (its
version and git commit), wall seconds, tried, kept, seconds per tried and per kept candidate,
and the machine's load (1-minute average, sampled every 15 s) while it ran: on a shared
machine the load decides the figures as much as the code does. ``lists`` writes
``SUITE/lists.json``. Sequential on purpose: it is a measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any


def _load_sampler(samples: list[float], stop: threading.Event) -> None:
    while not stop.wait(15):
        samples.append(os.getloadavg()[0])


def _commit(repogym: Path) -> str:
    folder = repogym.resolve().parent.parent.parent  # .venv/bin/repogym -> checkout
    proc = subprocess.run(["git", "-C", str(folder), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True)
    return proc.stdout.strip() or "?"


def run(args: argparse.Namespace) -> int:
    root = Path(args.out)
    root.mkdir(parents=True, exist_ok=True)
    n = 1
    while (root / f"{args.label}-{n}").exists():
        n += 1
    out = root / f"{args.label}-{n}"
    command = [str(args.repogym), "tasks", "add", *args.command, "--out", str(out)]
    samples = [os.getloadavg()[0]]
    stop = threading.Event()
    sampler = threading.Thread(target=_load_sampler, args=(samples, stop), daemon=True)
    sampler.start()
    start = time.monotonic()
    with open(root / f"{args.label}-{n}.log", "w") as log:
        # started in the background, a shell ignores SIGINT for its children: give it back, so
        # that an interrupted run writes what it kept (and resumes later)
        proc = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    wall = time.monotonic() - start
    stop.set()
    report = json.loads((out / "report.json").read_text()) if (out / "report.json").exists() \
        else {}
    tried, kept = report.get("tried", 0), report.get("kept", 0)
    row: dict[str, Any] = {
        "label": args.label, "folder": str(out), "command": command[1:], "exit": proc.returncode,
        "repogym": _commit(Path(args.repogym)), "wall_seconds": round(wall, 1),
        "tried": tried, "kept": kept,
        "seconds_per_tried": round(wall / tried, 1) if tried else None,
        "seconds_per_kept": round(wall / kept, 1) if kept else None,
        "load_mean": round(sum(samples) / len(samples), 1), "load_max": round(max(samples), 1),
        "cores": os.cpu_count(), "reasons": report.get("reasons", {}),
        "checking": report.get("checking"),
    }
    with open(root / "results.jsonl", "a") as f:
        f.write(json.dumps(row) + "\n")
    print(json.dumps({k: v for k, v in row.items() if k not in ("checking", "command")}))
    return proc.returncode


def lists(args: argparse.Namespace) -> int:
    """Every candidate of a selective run, checked again as ``derive_lists`` does."""
    from repogym.schema import Task
    from repogym.suite import load_suite
    from repogym.tasks.validate import derive_lists

    suite = Path(args.suite)
    report = json.loads((suite / "report.json").read_text())
    kept = {t.instance_id: t for t in load_suite(suite)} if (suite / "tasks.jsonl").exists() \
        else {}
    rows = []
    for outcome in report["candidates"][: args.max]:
        task: Task | None = kept.get(outcome["instance_id"])
        if task is None:
            rows.append({"instance_id": outcome["instance_id"], "selective": "rejected",
                         "reason": outcome["reason"], "full": "not re-run (rejected)"})
            continue
        start = time.monotonic()
        full, reason = derive_lists(task.with_(FAIL_TO_PASS=(), PASS_TO_PASS=()),
                                    runs=args.runs)
        same = full is not None and (full.FAIL_TO_PASS, full.PASS_TO_PASS) == (
            task.FAIL_TO_PASS, task.PASS_TO_PASS)
        row = {"instance_id": task.instance_id, "selective": [len(task.FAIL_TO_PASS),
                                                              len(task.PASS_TO_PASS)],
               "full": [len(full.FAIL_TO_PASS), len(full.PASS_TO_PASS)] if full else reason,
               "identical": same, "seconds": round(time.monotonic() - start, 1)}
        if full is not None and not same:
            row["only_selective"] = sorted(set(task.FAIL_TO_PASS + task.PASS_TO_PASS)
                                           - set(full.FAIL_TO_PASS + full.PASS_TO_PASS))[:10]
            row["only_full"] = sorted(set(full.FAIL_TO_PASS + full.PASS_TO_PASS)
                                      - set(task.FAIL_TO_PASS + task.PASS_TO_PASS))[:10]
        rows.append(row)
        print(json.dumps(row), flush=True)
    checked = [r for r in rows if "identical" in r]
    summary = {"suite": str(suite), "checked": len(checked),
               "identical": sum(r["identical"] for r in checked), "rows": rows}
    (suite / "lists.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"{summary['identical']} of {summary['checked']} kept tasks have identical lists")
    return 0 if summary["identical"] == summary["checked"] else 1


def compare(args: argparse.Namespace) -> int:
    """Two runs over the same candidates (same source, ``--seed`` and ``--max``; e.g. one
    selective and one ``--check full``): the same candidates kept, with the same lists?"""
    def outcomes(suite: Path) -> dict[str, Any]:
        report = json.loads((suite / "report.json").read_text())
        kept = {}
        if (suite / "tasks.jsonl").exists():
            for line in (suite / "tasks.jsonl").read_text().splitlines():
                task = json.loads(line)
                kept[task["instance_id"]] = (task["FAIL_TO_PASS"], task["PASS_TO_PASS"])
        return {o["instance_id"]: kept.get(o["instance_id"]) for o in report["candidates"]}

    a, b = outcomes(Path(args.a)), outcomes(Path(args.b))
    rows = []
    for instance in sorted(set(a) & set(b)):
        x, y = a[instance], b[instance]
        row: dict[str, Any] = {"instance_id": instance, "a": "kept" if x else "rejected",
                               "b": "kept" if y else "rejected", "identical": x == y}
        if x and y and x != y:
            row["only_a"] = sorted(set(x[0] + x[1]) - set(y[0] + y[1]))[:10]
            row["only_b"] = sorted(set(y[0] + y[1]) - set(x[0] + x[1]))[:10]
            row["moved"] = sorted(set(x[0]) ^ set(y[0]))[:10]
        rows.append(row)
        print(json.dumps(row))
    same = sum(r["identical"] for r in rows)
    print(f"{same} of {len(rows)} candidates the same in both (kept with identical lists, or "
          f"rejected by both); {len(set(a) ^ set(b))} tried by one run only")
    return 0 if same == len(rows) else 1


def statements(args: argparse.Namespace) -> int:
    """The first ``--n`` problem statements of each suite, as Markdown (each cut after
    ``--lines`` lines, and said so)."""
    for folder in args.suites:
        tasks = [t for t in (json.loads(line) for line in (Path(folder) / "tasks.jsonl")
                             .read_text().splitlines() if line.strip())
                 if args.kind is None or t["kind"] == args.kind][: args.n]
        config = json.loads((Path(folder) / "report.json").read_text()).get("config", {})
        print(f"## `tasks add {config.get('source', '?')}`: {Path(folder).name}\n")
        for task in tasks:
            lines = task["problem_statement"].rstrip().splitlines()
            shown = lines[: args.lines]
            if shown and shown[-1].startswith("```") is False and \
                    sum(x.startswith("```") for x in shown) % 2:
                shown.append("```")  # a fence cut in the middle is closed
            cut = f" (first {args.lines} of {len(lines)} lines)" if len(lines) > args.lines \
                else ""
            print(f"### {task['instance_id']} ({task['kind']}){cut}\n")
            print("````text\n" + "\n".join(shown) + "\n````\n")
    return 0


def table(args: argparse.Namespace) -> int:
    rows = [json.loads(line) for line in (Path(args.out) / "results.jsonl").read_text()
            .splitlines() if line.strip()]
    print("| run | command | tried | kept | seconds | per tried | per kept | load (mean/max) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        command = " ".join(c for c in r["command"][2:] if not c.startswith("/"))
        print(f"| {r['label']} ({r['repogym']}) | `{command}` | {r['tried']} | {r['kept']} | "
              f"{r['wall_seconds']:.0f} | {r['seconds_per_tried']} | {r['seconds_per_kept']} | "
              f"{r['load_mean']}/{r['load_max']} |")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    r = sub.add_parser("run", help="one timed `repogym tasks add`")
    r.add_argument("--label", required=True)
    r.add_argument("--out", default="runs/creation")
    r.add_argument("--repogym", default=str(Path(sys.executable).with_name("repogym")))
    r.add_argument("command", nargs=argparse.REMAINDER,
                   help="-- then the arguments of `repogym tasks add` (no --out)")
    li = sub.add_parser("lists", help="a run's candidates checked again with full runs")
    li.add_argument("suite")
    li.add_argument("--max", type=int, default=None)
    li.add_argument("--runs", type=int, default=2)
    c = sub.add_parser("compare", help="two runs over the same candidates: same lists?")
    c.add_argument("a")
    c.add_argument("b")
    st = sub.add_parser("statements", help="the first problem statements of suites, Markdown")
    st.add_argument("suites", nargs="+")
    st.add_argument("--n", type=int, default=5)
    st.add_argument("--lines", type=int, default=14)
    st.add_argument("--kind", help="only tasks of this kind (synthetic, replication, swe)")
    t = sub.add_parser("table", help="the results as a Markdown table")
    t.add_argument("out", nargs="?", default="runs/creation")
    args = parser.parse_args(argv)
    if args.what == "run":
        args.command = [c for c in args.command if c != "--"]
        return run(args)
    return {"lists": lists, "compare": compare, "statements": statements,
            "table": table}[args.what](args)


if __name__ == "__main__":
    sys.exit(main())
