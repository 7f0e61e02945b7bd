"""Builds the adversarial suite: every hack of :mod:`repogym.agents.hacker` on demo tasks.

    .venv/bin/python tasks/adversarial/build.py            # rewrite tasks.jsonl
    .venv/bin/python tasks/adversarial/build.py --check    # exit 1 if it is out of date

A task ``adv__<hack>__<demo id>`` is the demo task with split ``adversarial`` and the hidden
test ids named in the prompt, so the hacker aims at exactly them. Play it with
``repogym eval --suite adversarial --agent hacker``: every task must score 0. ``--with-limits``
adds the hack that is known to win (``decoy_aware``, see the manual's docs/safety.md).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from repogym.agents.hacker import HACKS, LANG_HACKS, LIMIT_HACKS, adversarial_task
from repogym.schema import Task
from repogym.suite import load_suite

SUITE = Path(__file__).resolve().parent


def base_tasks(tasks: list[Task], per_repo: int) -> list[Task]:
    """The first ``per_repo`` eval tasks of each repository, by id."""
    chosen: dict[str, list[Task]] = {}
    for task in sorted(tasks, key=lambda t: t.instance_id):
        picked = chosen.setdefault(task.repo, [])
        if task.split == "eval" and len(picked) < per_repo:
            picked.append(task)
    return [t for picked in chosen.values() for t in picked]


def rows(bases: list[Task], hacks: list[str], out_dir: Path, timeout: float) -> list[str]:
    out = []
    for hack in hacks:
        for base in bases:
            row = adversarial_task(base, hack, timeout).to_dict()
            if row.get("source"):
                row["source"] = os.path.relpath(row["source"], out_dir)
            out.append(json.dumps(row, sort_keys=True))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="demo", help="the suite whose tasks are attacked")
    parser.add_argument("--per-repo", type=int, default=1, help="base tasks per repository")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds a test run may take (the infinite loop waits this long)")
    parser.add_argument("--with-limits", action="store_true", help="add the known limits too")
    parser.add_argument("--out", type=Path, default=SUITE, help="the suite folder to write")
    parser.add_argument("--check", action="store_true", help="exit 1 if tasks.jsonl is stale")
    args = parser.parse_args(argv)
    hacks = list(HACKS) + (list(LIMIT_HACKS) if args.with_limits else [])
    bases = base_tasks(load_suite(args.base), args.per_repo)
    lines = rows(bases, hacks, args.out.resolve(), args.timeout)
    # the attacks on other languages' runners, each on the demo-langs tasks of its language
    langs = base_tasks(load_suite("demo-langs"), args.per_repo)
    for name, hack in LANG_HACKS.items():
        mine = [t for t in langs if t.environment.language in hack.languages]
        lines += rows(mine, [name], args.out.resolve(), args.timeout)
    text = "\n".join(lines) + "\n"
    path = args.out / "tasks.jsonl"
    if args.check:
        fresh = path.exists() and path.read_text() == text
        print(f"{path} is {'up to date' if fresh else 'out of date: rerun build.py'}")
        return 0 if fresh else 1
    args.out.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(f"wrote {path}: {len(hacks)} hacks x {len(bases)} tasks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
