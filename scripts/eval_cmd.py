"""`repogym eval`: runs an agent on every task of a suite (or grades a predictions file).

    repogym eval --suite demo --agent gold --workers 4 --out runs/demo/gold
    repogym eval --suite demo --agent llm --agent-option model=NAME --out runs/demo/llm
    repogym eval --suite S --predictions preds.jsonl --workers 4 --out runs/preds
    repogym eval --suite demo --agent gold --ray local        # or --ray auto, --ray HEAD:6379
    repogym eval --rerun runs/demo/gold                        # repeat a run from its config
    repogym eval --suite demo --agent gold --repeat 3          # verdict stability per task

Writes OUT/results.jsonl, OUT/summary.json, OUT/report.html and OUT/config.json; running the
same command again resumes (finished tasks are skipped).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from repogym.agents.evaluation.console import make_progress
from repogym.agents.evaluation.repeat import format_stability, run_repeated
from repogym.agents.evaluation.runner import EvalConfig, rerun, run_eval
from repogym.agents.registry import agent_names
from repogym.envs.backends import BACKENDS
from repogym.envs.grading.rewards import REWARDS
from repogym.schema import SPLITS
from repogym.scripts.output import table, write_json
from repogym.suite import ALL, BUILTIN


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="run an agent on a suite, or grade SWE-bench predictions",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--suite", help="built-in suite name, .jsonl file or suite folder")
    p.add_argument("--agent", default="gold", help=f"one of {', '.join(agent_names())} "
                   "or package.module:Class (default: gold)")
    p.add_argument("--agent-option", action="append", default=[], metavar="KEY=VALUE",
                   help="agent constructor option, repeatable; VALUE is parsed as JSON when it "
                   "can be (e.g. model=gpt-4o-mini, max_steps=20, seed=3)")
    p.add_argument("--split", default="eval", choices=(*SPLITS, ALL),
                   help="the tasks of this split (default: eval; training tasks measure "
                   "nothing held out; all: every task)")
    p.add_argument("--task", action="append", default=None, metavar="ID",
                   help="only this instance id (repeatable)")
    p.add_argument("--workers", type=int, default=None,
                   help="episodes at once (default: 1; with --ray: every CPU slot)")
    p.add_argument("--out", default=None, help="run folder (default: runs/SUITE/AGENT)")
    p.add_argument("--reward", default="binary", choices=sorted(REWARDS),
                   help="the reward function (default: binary; see docs/environment.md)")
    p.add_argument("--max-steps", type=int, default=50,
                   help="steps per episode before it is cut off (default: 50)")
    p.add_argument("--max-seconds", type=float, default=1800.0,
                   help="wall-clock seconds per episode before it is cut off (default: 1800)")
    p.add_argument("--retries", type=int, default=2,
                   help="retries after an infrastructure failure (default: 2)")
    p.add_argument("--pool-size", type=int, default=None,
                   help="containers kept started per image in each worker (default: the "
                   "workers share one pool that keeps a spare per image in use)")
    p.add_argument("--no-record", action="store_true", help="write no episode records")
    p.add_argument("--ray", default=None, metavar="ADDRESS",
                   help="run on Ray: local (a private instance), auto (this machine's "
                   "cluster) or HEAD:6379 / ray://HEAD:10001")
    p.add_argument("--predictions", default=None, metavar="FILE",
                   help="grade this SWE-bench predictions file (JSON or JSONL) instead; a file "
                   "of several systems (model_name_or_path) is graded system by system, each "
                   "into OUT/SYSTEM")
    p.add_argument("--rerun", default=None, metavar="DIR",
                   help="repeat the run recorded in DIR/config.json (into --out or DIR-rerun-*)")
    p.add_argument("--trajectories", default=None, choices=["atif", "openai"],
                   help="also write OUT/trajectories/*.json in this format (needs records)")
    p.add_argument("--repeat", type=int, default=1, metavar="N",
                   help="run every task N times (into OUT/repeat-1 .. OUT/repeat-N) and report "
                   "how stable each task's verdict is (OUT/stability.json)")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.add_argument("--backend", default=None, choices=sorted(BACKENDS),
                   help="the sandbox backend (default: REPOGYM_BACKEND, else docker): podman "
                   "is rootless Podman through its Docker-compatible socket")
    p.add_argument("--json", default=None, help="also write the summary here (- for stdout)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    progress = make_progress(args.quiet)
    if args.repeat > 1 and not args.rerun:
        if not args.suite:
            raise ValueError("give --suite SUITE with --repeat")
        combined = run_repeated(config_from_args(args), args.repeat, progress)
        print(format_stability(combined))
        write_json(args.json, combined)
        if combined["excluded"]:
            print(f"{combined['excluded']} episodes failed outside the agent; run the same "
                  "command again to retry them.")
        return 1 if combined["excluded"] else 0
    if args.rerun:
        summary = rerun(args.rerun, args.out, progress)
    else:
        if not args.suite:
            raise ValueError("give --suite SUITE (or --rerun DIR)")
        summary = run_eval(config_from_args(args), progress=progress)
    print(format_summary(summary))
    write_json(args.json, summary)
    if args.trajectories:
        # the gateway's package (starlette, uvicorn: the harness extra) only for --trajectories
        from repogym.agents.trajectory import export_run

        written = export_run(summary["out"], args.trajectories)
        print(f"{len(written)} trajectories ({args.trajectories}) in {summary['out']}/trajectories")
    excluded = sum(len(v) for v in summary["excluded"].values())
    if excluded:
        print(f"{excluded} tasks failed outside the agent (see 'excluded' in summary.json); "
              "run the same command again to retry the infrastructure failures.")
    return 1 if excluded else 0


def config_from_args(args: argparse.Namespace) -> EvalConfig:
    suite = args.suite
    if suite not in BUILTIN and Path(suite).exists():
        suite = str(Path(suite).resolve())  # a rerun from another folder finds it too
    predictions = str(Path(args.predictions).resolve()) if args.predictions else None
    name = Path(args.suite).stem if args.suite not in BUILTIN else args.suite
    who = f"predictions-{Path(args.predictions).stem}" if predictions else args.agent
    return EvalConfig(
        suite=suite, agent=args.agent, agent_options=parse_options(args.agent_option),
        split=args.split, task_ids=tuple(args.task or ()), workers=args.workers,
        out=args.out or str(Path("runs") / name / who.replace(":", "_")), reward=args.reward,
        max_steps=args.max_steps, max_seconds=args.max_seconds, retries=args.retries,
        record=not args.no_record, pool_size=args.pool_size, ray=args.ray,
        predictions=predictions, backend=args.backend,
    )


def parse_options(items: list[str]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--agent-option {item!r}: write KEY=VALUE")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    return options


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def format_summary(s: dict[str, Any]) -> str:
    if "systems" in s:  # a predictions file of several systems: a run each, then side by side
        parts = [f"== {name or '<unnamed>'} ({run['out']})\n{format_summary(run)}"
                 for name, run in s["systems"].items()]
        rows = [[name or "<unnamed>", f"{run['resolved']}/{run['n_counted']}",
                 _pct(run["resolved_rate"])] for name, run in s["systems"].items()]
        return "\n\n".join([*parts, table(rows, ["system", "resolved", "rate"])])
    return _format_one(s)


def _format_one(s: dict[str, Any]) -> str:
    lo, hi = s["resolved_ci95"]
    who = s.get("agent") or s.get("model") or "predictions"
    speed = f", {s['tasks_per_minute']:.2f} tasks/min" if s.get("tasks_per_minute") else ""
    lines = [f"{who} on {s['suite']}: {s['resolved']}/{s['n_counted']} resolved "
             f"({_pct(s['resolved_rate'])}, 95% CI {lo:.1%}-{hi:.1%}){speed}"]
    groups = [[f"repo {k}", v["n"], v["resolved"], _pct(v["rate"])]
              for k, v in s["by_repo"].items()]
    groups += [[f"kind {k}", v["n"], v["resolved"], _pct(v["rate"])]
               for k, v in s["by_kind"].items()]
    if groups:
        lines.append(table(groups, ["group", "tasks", "resolved", "rate"]))
    if s["mean_components"]:
        lines.append(table([[k, f"{v:.3f}"] for k, v in s["mean_components"].items()],
                           ["component", "mean"]))
    if s["failures"]:
        lines.append(table([[k, v] for k, v in s["failures"].items()], ["failure", "tasks"]))
    lines.append(f"results: {s['out']}/results.jsonl  report: {s['out']}/report.html")
    return "\n\n".join(lines)
