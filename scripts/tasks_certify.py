"""`repogym tasks certify --suite S`: every attack of the hacker against each task, recorded in
the task (``certificate``). A task that an attack beats leaves the suite unless
``--keep-hackable``. The suite's ``tasks.jsonl`` is rewritten in place: each certified row gets
its certificate and nothing else of any row changes."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repogym.errors import TaskError
from repogym.images.repository import ensure_image
from repogym.schema import SPLITS, Task
from repogym.scripts.output import progress, table, write_json
from repogym.suite import ALL, load_suite, select, suite_path

if TYPE_CHECKING:
    from repogym.agents.certify import CertifyConfig

# repogym.agents.certify's results, without importing the agents here
PASS, HACKABLE, INCOMPLETE = "pass", "hackable", "incomplete"
ATTACK_TIMEOUT, LOOP_TIMEOUT = 120.0, 10.0  # CertifyConfig's defaults


def add_certify_parser(subparsers: Any) -> None:
    c = subparsers.add_parser("certify", help="run the attack suite against each task and "
                              "record the result in the task")
    c.add_argument("--suite", required=True, help="a suite name, .jsonl file or folder")
    c.add_argument("--split", default=ALL, choices=(*SPLITS, ALL),
                   help="only the tasks of this split (default: all)")
    c.add_argument("--task", action="append", default=None, metavar="ID",
                   help="only this instance id (repeatable)")
    add_certify_options(c)
    c.add_argument("--json", default=None, help="write the certificates here (- for stdout)")
    c.set_defaults(func=certify_suite)


def add_certify_options(parser: argparse.ArgumentParser) -> None:
    """The flags ``tasks certify`` and ``tasks add`` share."""
    g = parser.add_argument_group("certificate (the hacker's attacks against every task)")
    g.add_argument("--keep-hackable", action="store_true",
                   help="keep a task that an attack beats (its certificate says which)")
    g.add_argument("--attacks", default=None, metavar="A,B",
                   help="only these attacks (default: every one written for each task's language: "
                        "repogym.agents.hacker.HACKS, repogym.agents.hacker.LANG_HACKS)")
    g.add_argument("--attack-timeout", type=float, default=ATTACK_TIMEOUT, metavar="S",
                   help="seconds each attack's test run may take")
    g.add_argument("--loop-timeout", type=float, default=LOOP_TIMEOUT, metavar="S",
                   help="the same for the attacks that never end (an infinite loop, a fork bomb)")
    g.add_argument("--attack-workers", type=int, default=None, metavar="N",
                   help="attacks played at once, each with an env and a grading container of "
                        "its own (default: 2, or 1 on a one-core machine)")
    g.add_argument("--no-shared-attacks", action="store_true",
                   help="play the attacks on the harness on every task (default: once for the "
                        "tasks of one repository snapshot and test layout, their results shared)")
    g.add_argument("--whole-grades", action="store_true",
                   help="grade every attack, and in `tasks add` every task's gold played as "
                        "an agent's diff, on every hidden test (default: an attack on the code "
                        "is graded on the FAIL_TO_PASS tests first, and whole only when that "
                        "grade does not settle it; the gold of a test layout's first task is "
                        "graded whole, its other tasks' on their FAIL_TO_PASS tests)")


def config_from(args: argparse.Namespace) -> CertifyConfig:
    # the agents (Gymnasium, the attack agents) load only when certifying: every `repogym
    # tasks` command imports this module
    from repogym.agents.certify import CertifyConfig

    limits: dict[str, Any] = {"timeout": args.attack_timeout, "loop_timeout": args.loop_timeout,
                              "share": not getattr(args, "no_shared_attacks", False),
                              "narrow": not getattr(args, "whole_grades", False)}
    if args.attack_workers is not None:
        limits["workers"] = args.attack_workers
    if args.attacks:
        hacks = tuple(a.strip() for a in args.attacks.split(",") if a.strip())
        return CertifyConfig(hacks=hacks, **limits)
    return CertifyConfig(**limits)


def certify_tasks(tasks: list[Task], args: argparse.Namespace,
                  on_task: Callable[[Task], None] | None = None) -> list[Task]:
    """Certified tasks (images built first); prints a table of the results."""
    from repogym.agents.certify import certify  # the agents load only when certifying

    for task in {t.repo + t.base_commit: t for t in tasks}.values():
        ensure_image(task, progress=progress)
    done = certify(tasks, config_from(args), progress, on_task)
    print(table([[t.instance_id, (t.certificate or {}).get("result", ""),
                  ", ".join((t.certificate or {}).get("beaten_by", [])),
                  ", ".join(not_run(t.certificate or {})),
                  f"{(t.certificate or {}).get('seconds', 0):.0f}"] for t in done],
                ["task", "certificate", "beaten by", "did not run", "seconds"]))
    results = [(t.certificate or {}).get("result") for t in done]
    print(f"certificates: {results.count(PASS)} pass, {results.count(HACKABLE)} hackable, "
          f"{results.count(INCOMPLETE)} incomplete")
    for task in done:
        if (task.certificate or {}).get("result") == INCOMPLETE:
            print(f"incomplete: {task.instance_id}: {incomplete_reason(task.certificate or {})}")
    return done


def not_run(cert: dict[str, Any]) -> list[str]:
    """The attacks of a certificate whose episode did not run to its end."""
    return sorted(name for name, a in cert.get("attacks", {}).items() if a.get("error"))


def incomplete_reason(cert: dict[str, Any]) -> str:
    """Which attacks did not run, and why (each one's error, cut)."""
    if cert.get("error"):
        return str(cert["error"])
    names = not_run(cert)
    if not names:
        return "no attack was played"
    why = "; ".join(f"{n}: {cert['attacks'][n]['error'][:160]}" for n in names[:3])
    more = f" (and {len(names) - 3} more)" if len(names) > 3 else ""
    return f"{len(names)} attacks did not run: {', '.join(names)}{more}. {why}"


def certify_suite(args: argparse.Namespace) -> int:
    tasks = select(load_suite(args.suite), args.split, args.task or (),
                   where=f"suite {args.suite!r}")
    if not tasks:
        raise TaskError(f"suite {args.suite!r} holds no task: nothing to certify.")
    path = task_file(suite_path(args.suite))

    def record(task: Task) -> None:  # each task as it is done: a stopped run keeps those
        cert = task.certificate or {}
        dropped = cert.get("result") == HACKABLE and not args.keep_hackable
        rewrite(path, {task.instance_id: cert}, {task.instance_id} if dropped else set())

    start = time.monotonic()
    done = certify_tasks(tasks, args, record)
    result = {t.instance_id: (t.certificate or {}).get("result") for t in done}
    hackable = [i for i, r in result.items() if r == HACKABLE]
    incomplete = [i for i, r in result.items() if r == INCOMPLETE]
    per_task = (time.monotonic() - start) / len(done)
    # only a complete certificate with no attack winning is a pass
    print(f"{list(result.values()).count(PASS)}/{len(done)} tasks withstood every attack "
          f"({per_task:.0f} s per task); certificates written to {path}")
    if hackable:
        print(f"hackable: {', '.join(hackable)}"
              + ("" if args.keep_hackable else " (left out of the suite; --keep-hackable "
                 "keeps them)"))
    if incomplete:
        print(f"incomplete: {', '.join(incomplete)} (not every attack ran: the tasks are not "
              "certified; see the reasons above, then run again with --task ID)")
    write_json(args.json, [{"instance_id": t.instance_id, "certificate": t.certificate}
                           for t in done])
    return 1 if hackable or incomplete else 0


def task_file(suite: Path) -> Path:
    """The file certificates are written into: a suite's ``tasks.jsonl``."""
    path = suite / "tasks.jsonl" if suite.is_dir() else suite
    if path.suffix != ".jsonl":
        raise TaskError(f"{path}: certificates are written into a .jsonl suite; convert it "
                        "first (`repogym tasks add` and the built-in suites write .jsonl).")
    return path


def rewrite(suite: Path, certificates: dict[str, dict[str, Any]], dropped: set[str]) -> Path:
    """The suite's task file with the certificates in, the dropped tasks out, every other
    byte as it was."""
    path = task_file(suite)
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line) if line.strip() else None
        if row is None or row.get("instance_id") not in certificates:
            out.append(line)
            continue
        if row["instance_id"] in dropped:
            continue
        keys_sorted = list(row) == sorted(row)
        row["certificate"] = certificates[row["instance_id"]]
        out.append(json.dumps(row, ensure_ascii=line.isascii(), sort_keys=keys_sorted))
    path.write_text("".join(f"{line}\n" for line in out), encoding="utf-8")
    return path


def certify_collected(result: Any, args: argparse.Namespace) -> None:
    """``tasks add``: certifies what ``result`` (a ``Collected``) kept; a hackable task
    becomes a rejection (kind ``hackable``) unless ``--keep-hackable``."""
    if not result.kept:
        return
    done = certify_tasks(result.kept, args)
    outcomes = {o["instance_id"]: o for o in result.outcomes if o.get("kept")}
    kept = []
    for task in done:
        cert = task.certificate or {}
        outcome = outcomes.get(task.instance_id, {})
        outcome["certificate"] = cert.get("result")
        if cert.get("result") == INCOMPLETE:
            outcome["certificate_incomplete"] = incomplete_reason(cert)
        if cert.get("result") == HACKABLE and not args.keep_hackable:
            outcome.update(kept=False, reason_kind="hackable",
                           reason=f"hackable: beaten by {', '.join(cert['beaten_by'])}")
            continue
        kept.append(task)
    result.kept = kept
