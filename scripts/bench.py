"""`repogym bench`: the environment's speed next to the plain alternatives, side by side."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from repogym.bench.run import SECTIONS, BenchConfig, run_bench
from repogym.scripts.output import progress, table, write_json

DEFAULTS = BenchConfig()


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="measure step, reset and grading latency, throughput, memory")
    p.add_argument("--suite", default=DEFAULTS.suite, help="suite to take the task from")
    p.add_argument("--task", default=None, help="task id (default: the suite's first)")
    p.add_argument("--steps", type=int, default=DEFAULTS.steps,
                   help="step latency samples per method and command")
    p.add_argument("--resets", type=int, default=DEFAULTS.resets, help="reset samples per variant")
    p.add_argument("--grades", type=int, default=DEFAULTS.grades, help="repogym grading samples")
    p.add_argument("--swebench-runs", type=int, default=DEFAULTS.swebench_runs,
                   help="swebench run_instance samples (each ~16 s)")
    p.add_argument("--startup-runs", type=int, default=DEFAULTS.startup_runs,
                   help="new processes per start-up measure (repogym --help against python)")
    p.add_argument("--creation-candidates", type=int, default=DEFAULTS.creation_candidates,
                   help="planted bugs the creation section checks both ways")
    p.add_argument("--parallel", default=",".join(map(str, DEFAULTS.parallel)),
                   help="env counts stepping at once, e.g. 1,2,4")
    p.add_argument("--parallel-seconds", type=float, default=DEFAULTS.parallel_seconds,
                   help="seconds each parallel level steps")
    p.add_argument("--only", default=None,
                   help=f"comma-separated sections to run ({','.join(SECTIONS)})")
    p.add_argument("--skip", default="", help="comma-separated sections to leave out")
    p.add_argument("--quick", action="store_true",
                   help="tiny counts: check that every section works, not a measurement")
    p.add_argument("--logs-dir", default=None, help="where swebench writes its logs")
    p.add_argument("--out", default="bench.json", help="JSON results (- for stdout)")
    p.set_defaults(func=run)


def config_from(args: argparse.Namespace) -> BenchConfig:
    chosen = _names(args.only) if args.only else SECTIONS
    sections = tuple(s for s in chosen if s not in _names(args.skip))
    try:
        parallel = tuple(int(x) for x in _names(args.parallel))
    except ValueError as exc:
        raise ValueError(f"--parallel {args.parallel!r}: give env counts like 1,2,4") from exc
    config = BenchConfig(
        suite=args.suite, task_id=args.task, steps=args.steps, resets=args.resets,
        grades=args.grades, swebench_runs=args.swebench_runs, parallel=parallel,
        parallel_seconds=args.parallel_seconds, sections=sections, logs_dir=args.logs_dir,
        startup_runs=args.startup_runs, creation_candidates=args.creation_candidates)
    return config.quick() if args.quick else config


def _names(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def run(args: argparse.Namespace) -> int:
    config = config_from(args)  # a bad value raises ValueError: the command line says which
    result = run_bench(config, progress=progress)
    result["command"] = " ".join(["repogym", *sys.argv[1:]])
    print(render(result))
    write_json(args.out, result)
    if args.out not in (None, "-"):
        print(f"wrote {args.out}")
    return 0


def render(result: dict[str, Any]) -> str:
    """The rows as a table, then the issue's goals met or missed."""
    m = result["machine"]
    head = (f"repogym bench on {result['task']} ({m['cpus']} CPUs, Docker {m['docker']}, "
            f"load {m['loadavg_start'][0]:.1f} -> {m['loadavg_end'][0]:.1f}, "
            f"{m['seconds']:.0f} s)")
    rows = [_cells(r) for r in result["rows"]]
    out = [head, table(rows, ["section", "measure", "median", "p10-p90", "n", "ratio", "note"])]
    goals = [[("met" if t["met"] else "MISSED"), t["goal"], _measured(t)]
             for t in result["targets"]]
    if goals:
        out += ["", table(goals, ["", "goal", "measured"])]
    return "\n".join(out)


def _cells(r: dict[str, Any]) -> list[str]:
    s, unit = r["stat"], r["unit"]
    if s is None:
        return [r["section"], r["name"], "not measured", "", "0", "", r["note"]]
    ratio = ""
    if r["ratio"] is not None:
        ratio = f"{r['ratio']:.2f}x {r['vs']}"
    return [r["section"], r["name"], f"{_num(s['median'])} {unit}",
            f"{_num(s['p10'])}-{_num(s['p90'])}", str(s["n"]), ratio, r["note"]]


def _measured(target: dict[str, Any]) -> str:
    if ("x " in target["goal"] or "faster" in target["goal"]) and target["ratio"] is not None:
        return f"{target['ratio']:.1f}x"
    return _num(target["median"])


def _num(x: float) -> str:
    return f"{x:.3g}" if abs(x) < 100 else f"{x:.0f}"
