"""Puts the verdicts of eval runs side by side, task by task: the same suite graded on
different backends (or machines) must agree.

    python tools/compare_verdicts.py runs/xb/docker-demo-gold runs/xb/podman-demo-gold \
        [--json out.json]

A verdict is a task's ``resolved``, ``reward`` and ``flags``; a task missing from a run, or
failed there for infrastructure reasons, is a difference too. For the adversarial suite
(tasks ``adv__HACK__...``) every run is also checked to score 0 with the hack's flags.
Exit status 0 when every verdict agrees (and every attack was stopped), 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from repogym.agents.hacker import HACKS, LANG_HACKS, hack_for_task


def read_run(folder: Path) -> dict[str, dict[str, Any]]:
    path = folder / "results.jsonl"
    if not path.is_file():
        raise SystemExit(f"{path} does not exist: give eval run folders (repogym eval --out)")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {row["instance_id"]: row for row in rows}


def verdict(row: dict[str, Any] | None) -> str:
    if row is None:
        return "missing"
    if row.get("error_kind"):
        return f"error:{row['error_kind']}"
    flags = ",".join(sorted(row.get("flags") or []))
    return f"{'resolved' if row.get('resolved') else 'not'} {row.get('reward')}" + (
        f" [{flags}]" if flags else "")


def attack_stopped(instance_id: str, row: dict[str, Any] | None) -> str:
    """'' when the attack of an adversarial task scored 0 with its flags, else why not."""
    hack = hack_for_task(instance_id)
    known = HACKS.get(hack or "") or LANG_HACKS.get(hack or "")
    if known is None:
        return ""
    if row is None or row.get("error_kind"):
        return "not graded"
    if row.get("resolved") or float(row.get("reward") or 0.0) != 0.0:
        return f"scored {row.get('reward')}"
    if not known.detected(list(row.get("flags") or [])):
        return f"flags {row.get('flags')} lack {known.flags}"
    return ""


def compare(runs: dict[str, dict[str, dict[str, Any]]]) -> dict[str, Any]:
    ids = sorted(set().union(*(set(r) for r in runs.values())))
    table, differ, attacks = [], [], []
    for iid in ids:
        verdicts = {name: verdict(rows.get(iid)) for name, rows in runs.items()}
        same = len(set(verdicts.values())) == 1
        table.append({"instance_id": iid, "verdicts": verdicts, "same": same})
        if not same:
            differ.append(iid)
        for name, rows in runs.items():
            why = attack_stopped(iid, rows.get(iid))
            if why:
                attacks.append({"instance_id": iid, "run": name, "why": why})
    return {"runs": list(runs), "tasks": len(ids), "equal": len(ids) - len(differ),
            "differ": differ, "attacks_not_stopped": attacks, "table": table}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="eval run folders")
    parser.add_argument("--json", default=None, help="write the comparison here")
    args = parser.parse_args(argv)
    runs = {str(folder): read_run(folder) for folder in args.runs}
    result = compare(runs)
    names = [Path(n).name for n in result["runs"]]
    width = max(len(r["instance_id"]) for r in result["table"]) if result["table"] else 10
    print(f"{'task':<{width}}  " + "  ".join(f"{n:<28}" for n in names) + "  same")
    for r in result["table"]:
        cells = "  ".join(f"{v:<28}" for v in r["verdicts"].values())
        print(f"{r['instance_id']:<{width}}  {cells}  {'yes' if r['same'] else 'NO'}")
    print(f"{result['equal']}/{result['tasks']} verdicts equal across {', '.join(names)}")
    for a in result["attacks_not_stopped"]:
        print(f"attack not stopped: {a['instance_id']} in {Path(a['run']).name}: {a['why']}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0 if not result["differ"] and not result["attacks_not_stopped"] else 1


if __name__ == "__main__":
    sys.exit(main())
