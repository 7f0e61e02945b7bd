#!/usr/bin/env python3
"""The breadth corpus: `repogym tasks add` over projects nobody here prepared, with the
defaults a user gets (gold cases and certification on), and a table of what came of each.

    python tools/corpus.py list                                  # the projects, and why each
    python tools/corpus.py run --out runs/breadth --workers 2    # every project (resumable)
    python tools/corpus.py run --out runs/breadth --only isodate,jmespath
    python tools/corpus.py table --out runs/breadth [--markdown FILE]

The projects are ``tools/corpus.json`` (see docs/breadth.md for the rule they were chosen by):
each is a package index release (``tasks add pypi NAME==VERSION``) or a public git repository
mirrored locally (``tasks add git MIRROR``; mirrors are found under ``--mirrors`` as
``OWNER+NAME/repo``, ``OWNER__NAME`` or ``OWNER/NAME``, the layouts of ``--repos``).

``run`` starts one ``repogym tasks add`` per project, ``--workers`` at once, each writing its
suite to ``OUT/NAME`` and its output to ``OUT/NAME.log``; what a project's run ended with goes
to ``OUT/NAME.json`` (the command, exit status, wall seconds, the machine's load, this
checkout's commit). Running the
same command again skips the projects that finished and resumes the others (``tasks add``
resumes an interrupted run from its progress file); ``--again`` runs finished ones anew
(their suites grow by ``--max`` new candidates). Arguments after ``--`` go to every
``tasks add``.

``table`` reads each project's ``report.json`` and ``tasks.jsonl``: candidates tried, kept,
rejections by kind, the kept tasks' certificates (pass, incomplete, and attacks that scored
above 0), and wall seconds per kept task, and writes ``OUT/table.md`` and ``OUT/table.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tools" / "corpus.json"
MIRRORS = Path(os.environ.get("REPOGYM_CORPUS_MIRRORS", "/work/.mirror"))


def load_corpus(path: Path) -> list[dict[str, Any]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    projects = data["projects"]
    names = [p["name"] for p in projects]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise SystemExit(f"{path}: names used twice: {dup}")
    for p in projects:
        if p.get("source") not in ("pypi", "git") or not p.get("spec") or not p.get("why"):
            raise SystemExit(f"{path}: {p.get('name')}: give source (pypi|git), spec and why")
    return projects


def find_mirror(root: Path, repo: str) -> Path | None:
    owner, _, name = repo.partition("/")
    for path in (root / f"{owner}+{name}" / "repo", root / f"{owner}__{name}",
                 root / owner / name, root / f"{owner}+{name}"):
        if (path / "HEAD").exists() or (path / ".git").exists():
            return path
    return None


def command(project: dict[str, Any], out: Path, args: argparse.Namespace) -> list[str]:
    repogym = str(Path(args.repogym))
    suite = ["--out", str(out / project["name"]), "--max", str(project.get("max", args.max))]
    if args.keep:
        suite += ["--keep", str(args.keep)]
    extra = [*project.get("args", []), *args.extra]
    if project["source"] == "pypi":
        return [repogym, "tasks", "add", "pypi", project["spec"], *suite, *extra]
    mirror = find_mirror(Path(args.mirrors), project["spec"])
    if mirror is None:
        raise FileNotFoundError(f"no mirror of {project['spec']} under {args.mirrors} "
                                "(bring it with the fetch tool, or pass --mirrors DIR)")
    return [repogym, "tasks", "add", "git", str(mirror), *suite, *extra]


class Load:
    """The 1-minute load average, sampled every 15 s while a run goes on."""

    def __init__(self) -> None:
        self.samples: list[float] = [os.getloadavg()[0]]
        self.stop = threading.Event()
        threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self) -> None:
        while not self.stop.wait(15):
            self.samples.append(os.getloadavg()[0])

    def summary(self) -> dict[str, float]:
        self.stop.set()
        s = self.samples
        return {"mean": round(sum(s) / len(s), 1), "max": round(max(s), 1)}


def run_one(project: dict[str, Any], out: Path, args: argparse.Namespace) -> dict[str, Any]:
    state = out / f"{project['name']}.json"
    try:
        argv = command(project, out, args)
    except FileNotFoundError as exc:
        record = {"name": project["name"], "status": "no source", "error": str(exc)}
        state.write_text(json.dumps(record, indent=1) + "\n")
        return record
    before = json.loads(state.read_text()) if state.exists() else {}
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    load, start = Load(), time.monotonic()
    print(f"[corpus] {project['name']}: {' '.join(argv)}", flush=True)
    with open(out / f"{project['name']}.log", "a", encoding="utf-8") as log:
        log.write(f"\n$ {' '.join(argv)}\n")
        log.flush()
        proc = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT,
                              timeout=args.timeout or None)
    seconds = time.monotonic() - start
    record = {"name": project["name"], "command": argv, "exit": proc.returncode,
              "repogym_commit": commit,
              # an interrupted run resumed: its seconds add up
              "seconds": round(seconds + (before.get("seconds", 0) if before.get(
                  "status") == "interrupted" else 0), 1),
              "load": load.summary(), "finished": time.strftime("%Y-%m-%dT%H:%M:%S"),
              "status": status_of(proc.returncode)}
    if record["status"] == "failed":  # what tasks add said, for the table
        record["error"] = _last_error(out / f"{project['name']}.log")
    state.write_text(json.dumps(record, indent=1) + "\n")
    print(f"[corpus] {project['name']}: exit {proc.returncode} in {seconds:.0f} s", flush=True)
    return record


def status_of(code: int) -> str:
    """What a project's ``tasks add`` ended with: ``done`` when it ran its candidates (exit 0,
    or 1: none kept), ``interrupted`` when stopped (130, or a signal), else ``failed`` (2: it
    refused to start, such as a progress file of another configuration; or a crash). Only a
    ``done`` project is skipped the next time."""
    if code in (0, 1):
        return "done"
    return "interrupted" if code == 130 or code < 0 else "failed"


def run(args: argparse.Namespace) -> int:
    projects = load_corpus(Path(args.corpus))
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - {p["name"] for p in projects}
        if unknown:
            raise SystemExit(f"--only: unknown projects {sorted(unknown)}")
        projects = [p for p in projects if p["name"] in wanted]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    todo = []
    for project in projects:
        state = out / f"{project['name']}.json"
        done = json.loads(state.read_text()).get("status") == "done" if state.exists() else False
        if done and not args.again:
            continue
        todo.append(project)
    print(f"[corpus] {len(todo)} of {len(projects)} projects to run, {args.workers} at once",
          flush=True)
    with ThreadPoolExecutor(max_workers=args.workers) as pool:
        records = list(pool.map(lambda p: run_one(p, out, args), todo))
    write_table(out, load_corpus(Path(args.corpus)))
    return 0 if all(r.get("status") == "done" for r in records) else 1


# ---------------------------------------------------------------------------- the table


def project_row(project: dict[str, Any], out: Path) -> dict[str, Any]:
    name = project["name"]
    state_path, suite = out / f"{name}.json", out / name
    state = json.loads(state_path.read_text()) if state_path.exists() else {}
    row: dict[str, Any] = {"name": name, "source": project["source"], "spec": project["spec"],
                           "styles": project.get("styles", []),
                           "status": state.get("status", "not run"), "exit": state.get("exit"),
                           "seconds": state.get("seconds"), "load": state.get("load")}
    report_path = suite / "report.json"
    if not report_path.exists():
        row["error"] = state.get("error") or _last_error(out / f"{name}.log")
        return row
    report = json.loads(report_path.read_text())
    tasks = [json.loads(line) for line in (suite / "tasks.jsonl").read_text().splitlines()
             if line.strip()] if (suite / "tasks.jsonl").exists() else []
    certs = [t.get("certificate") or {} for t in tasks]
    won = sorted({f"{t['instance_id']}:{name}" for t, c in zip(tasks, certs, strict=True)
                  for name, a in c.get("attacks", {}).items()
                  if a.get("reward", 0) > 0 or a.get("resolved")
                  or (a.get("valid", True) and a.get("f2p_pass_rate", 0) > 0)})
    row.update({
        "tried": report.get("tried", 0), "kept": len(tasks),
        "rejected": dict(sorted(report.get("reasons", {}).items(), key=lambda kv: -kv[1])),
        "certificates": {r: sum(c.get("result") == r for c in certs)
                         for r in ("pass", "incomplete", "hackable")},
        "uncertified": sum(not c for c in certs),
        "attacks_won_on_kept": won,
        "certify_seconds": round(sum(c.get("seconds", 0) for c in certs), 1),
    })
    if row["seconds"] and tasks:
        row["seconds_per_kept"] = round(row["seconds"] / len(tasks), 1)
    return row


def _last_error(log: Path) -> str:
    if not log.exists():
        return ""
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    return lines[-1][:200] if lines else ""


def markdown(rows: list[dict[str, Any]]) -> str:
    head = ("| project | source | tried | kept | rejected (by kind) | certificates: pass / "
            "incomplete | attacks above 0 on kept | s per kept task | load |\n"
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
    lines = []
    for r in rows:
        if "tried" not in r:
            status = r["status"] + (f" (exit {r['exit']})" if r.get("exit") else "")
            lines.append(f"| {r['name']} | {r['spec']} | | | {status}: "
                         f"{_cell(r.get('error', ''))} | | | | |")
            continue
        rejected = ", ".join(f"{k} ({v})" for k, v in r["rejected"].items()) or "none"
        certs = r["certificates"]
        load = r.get("load") or {}
        lines.append(
            f"| {r['name']} | {r['spec']} | {r['tried']} | {r['kept']} | {_cell(rejected)} | "
            f"{certs['pass']} / {certs['incomplete']}"
            + (f" ({r['uncertified']} uncertified)" if r["uncertified"] else "")
            + f" | {len(r['attacks_won_on_kept'])} | {r.get('seconds_per_kept', '')} | "
            f"{load.get('mean', '')} |")
    ran = [r for r in rows if "tried" in r]
    three = sum(r["kept"] >= 3 for r in ran)
    total = (f"\n{len(ran)} of {len(rows)} projects ran; {three} of them "
             f"({100 * three / max(1, len(ran)):.0f}%) kept at least 3 tasks; "
             f"{sum(r['kept'] for r in ran)} tasks kept of {sum(r['tried'] for r in ran)} "
             f"tried; {sum(r['certificates']['incomplete'] for r in ran)} incomplete "
             f"certificates; {sum(len(r['attacks_won_on_kept']) for r in ran)} attacks scored "
             "above 0 on a kept task.\n")
    return head + "\n".join(lines) + "\n" + total


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def write_table(out: Path, projects: list[dict[str, Any]]) -> str:
    rows = [project_row(p, out) for p in projects]
    text = markdown(rows)
    (out / "table.md").write_text(text, encoding="utf-8")
    (out / "table.json").write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return text


def table(args: argparse.Namespace) -> int:
    text = write_table(Path(args.out), load_corpus(Path(args.corpus)))
    if args.markdown:
        Path(args.markdown).write_text(text, encoding="utf-8")
    print(text)
    return 0


def list_projects(args: argparse.Namespace) -> int:
    projects = load_corpus(Path(args.corpus))
    for p in projects:
        print(f"{p['name']:24} {p['source']:5} {p['spec']:32} {', '.join(p.get('styles', []))}")
    print(f"{sum(p['source'] == 'pypi' for p in projects)} from the package index, "
          f"{sum(p['source'] == 'git' for p in projects)} git repositories")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, extra = argv[:at], argv[at + 1:]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=str(CORPUS), help="the project list (JSON)")
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="tasks add over the corpus (resumable)")
    r.add_argument("--out", default="runs/breadth")
    r.add_argument("--workers", type=int, default=1, help="projects at once")
    r.add_argument("--max", type=int, default=5, help="candidates per project (tasks add --max)")
    r.add_argument("--keep", type=int, default=0,
                   help="stop a project once N tasks are kept (tasks add --keep; 0: no stop)")
    r.add_argument("--only", default="", help="comma-separated project names")
    r.add_argument("--again", action="store_true", help="run finished projects again")
    r.add_argument("--timeout", type=float, default=0, help="seconds per project (0: none)")
    r.add_argument("--mirrors", default=str(MIRRORS), help="where the git mirrors are")
    r.add_argument("--repogym", default=str(Path(sys.executable).with_name("repogym")))
    r.set_defaults(func=run)
    t = sub.add_parser("table", help="the table of a run")
    t.add_argument("--out", default="runs/breadth")
    t.add_argument("--markdown", default="", help="also write the table here")
    t.set_defaults(func=table)
    ls = sub.add_parser("list", help="the projects")
    ls.set_defaults(func=list_projects)
    args = parser.parse_args(argv)
    args.extra = extra
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
