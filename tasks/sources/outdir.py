"""The folder a ``tasks add`` writes: a new suite, or an existing one that grows.

- A new or empty folder becomes a suite; so does one that a run which kept nothing left (an
  empty ``tasks.jsonl`` and its report), so the same command can run into it again.
- A folder that holds a suite (``tasks.jsonl``) grows: its lines are never rewritten, new tasks
  are appended. A candidate the suite already holds (same id, same base commit and patches) is
  skipped without a check; a new task whose id is taken gets the first free ``-N`` suffix, so
  ids never collide. New tasks reuse the suite's copy of their repository when it is a git
  repository that holds (or can fetch) their base commit, else get a copy of their own.
- A folder that holds anything else is refused, and so is a progress file written by another
  configuration.
- ``progress.jsonl`` records every finished candidate while the run goes on (the config on its
  first line), so a run that stopped for any reason resumes where it stopped when the same
  command runs again. It is removed once the run finished and its suite is written.
- ``report.json`` describes the latest run; an earlier one is kept as ``report-N.json``.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path
from typing import Any

from repogym.errors import RepogymError, UsageError
from repogym.schema import Task

from .common import is_git_source, run_git

TASKS = "tasks.jsonl"
PROGRESS = "progress.jsonl"
# Config keys that may change between an interrupted run and its resumption.
VOLATILE = ("max_candidates", "workers", "ray")


class OutputError(UsageError):
    """The output folder cannot take this run (a bad ``--out``: exit status 2)."""


def _same_content(a: Task, b: Task) -> bool:
    return (a.base_commit, a.patch, a.test_patch) == (b.base_commit, b.patch, b.test_patch)


def _stable(config: dict[str, Any]) -> str:
    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in VOLATILE}
        return value

    return json.dumps(strip(config), sort_keys=True, default=str)


class SuiteFolder:
    """One run's view of its output folder (see the module docstring)."""

    def __init__(self, out: Path, config: dict[str, Any] | None = None) -> None:
        """Reads the folder; without ``config``, only checks it can take a run."""
        self.out, self.config = out, config or {}
        self.rows: list[str] = []  # the suite's lines as they are
        self.existing: dict[str, Task] = {}
        self.earlier_runs: dict[str, tuple[dict[str, Any], Task | None]] = {}
        self._lock = threading.Lock()
        if out.exists() and not out.is_dir():
            raise OutputError(f"--out {out} is a file: give a folder (new, empty, or a suite).")
        if out.is_dir():
            self._read_suite()
            if config is not None:
                self._read_progress()
            # a suite of no task (a run that kept nothing) is a suite: it can be run into again
            if not (out / TASKS).exists() and not (out / PROGRESS).exists() \
                    and any(out.iterdir()):
                raise OutputError(
                    f"--out {out} holds files but no suite ({TASKS}): give a new or empty folder, "
                    "or a suite folder to add to.")

    def _read_suite(self) -> None:
        path = self.out / TASKS
        if not path.exists():
            return
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                task = Task.from_dict(json.loads(line), base_dir=self.out)
            except (ValueError, RepogymError) as exc:
                raise OutputError(f"{path}:{number} is not a task ({exc}); fix or move that "
                                  "file before adding to the suite.") from exc
            self.rows.append(line)
            self.existing[task.instance_id] = task

    def _read_progress(self) -> None:
        path = self.out / PROGRESS
        if not path.exists():
            return
        lines = path.read_text(encoding="utf-8").splitlines()
        header = json.loads(lines[0]) if lines else {}
        if _stable(header.get("config", {})) != _stable(self.config):
            raise OutputError(
                f"{path} belongs to an unfinished run with another configuration: run that "
                "command again to finish it, or delete the file to start this one.")
        for line in lines[1:]:
            try:
                record = json.loads(line)
            except ValueError:
                continue  # the line being written when the run was killed
            task = Task.from_dict(record["task"]) if record.get("task") else None
            self.earlier_runs[record["outcome"]["instance_id"]] = (record["outcome"], task)

    # ------------------------------------------------------------------------ the run

    def begin(self) -> None:
        """Starts the progress file (kept as it is when resuming)."""
        self.out.mkdir(parents=True, exist_ok=True)
        path = self.out / PROGRESS
        if not path.exists():
            path.write_text(json.dumps({"config": self.config}, default=str) + "\n")

    def skip(self, task: Task) -> bool:
        """True for a candidate the suite already holds."""
        held = self.existing.get(task.instance_id)
        return held is not None and _same_content(held, task)

    def earlier(self, instance_id: str) -> tuple[dict[str, Any], Task | None] | None:
        return self.earlier_runs.get(instance_id)

    def record(self, outcome: dict[str, Any], task: Task | None) -> None:
        line = json.dumps({"outcome": outcome, "task": task.to_dict() if task else None},
                          default=str)
        with self._lock, open(self.out / PROGRESS, "a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())

    # ------------------------------------------------------------------------ the suite

    def write(self, kept: list[Task], copy_sources: bool, report: dict[str, Any],
              finished: bool) -> dict[str, Any]:
        """Appends the new tasks and writes the report; the progress file goes when the run
        finished. Returns what was added."""
        self.out.mkdir(parents=True, exist_ok=True)
        added, renamed = [], {}
        taken = set(self.existing)
        copies: dict[str, str] = {}
        for task in kept:
            held = self.existing.get(task.instance_id)
            if held is not None and _same_content(held, task):
                continue  # written by an interrupted run of this command
            if task.instance_id in taken:
                new_id = _free_id(task.instance_id, taken)
                renamed[task.instance_id] = new_id
                task = task.with_(instance_id=new_id)
            taken.add(task.instance_id)
            row = task.to_dict()
            if copy_sources and task.source:
                row["source"] = self._place_source(task, copies)
            added.append(json.dumps(row, sort_keys=True))
        tasks_file = self.out / TASKS
        with open(tasks_file, "a", encoding="utf-8") as f:
            for line in added:
                f.write(line + "\n")
        self.rows += added
        self._write_report({**report, "tasks_file": str(tasks_file),
                            "suite": {"before": len(self.existing), "added": len(added),
                                      "renamed": renamed, "total": len(self.rows)}})
        if finished:
            (self.out / PROGRESS).unlink(missing_ok=True)
        return {"added": len(added), "renamed": renamed, "total": len(self.rows),
                "tasks_file": tasks_file}

    def _write_report(self, report: dict[str, Any]) -> None:
        path = self.out / "report.json"
        if path.exists():
            n = 1
            while (self.out / f"report-{n}.json").exists():
                n += 1
            path.rename(self.out / f"report-{n}.json")
        path.write_text(json.dumps(report, indent=2, default=str) + "\n")

    def _place_source(self, task: Task, copies: dict[str, str]) -> str:
        """The suite-relative repository of a new task: the suite's own copy of the same
        repository when it holds (or can fetch) the base commit, else a new copy."""
        src = str(Path(task.source or "").resolve())
        if src in copies and _has_commit(self.out / copies[src], task.base_commit):
            return copies[src]
        for held in self.existing.values():
            if held.repo != task.repo or not held.source:
                continue
            repo = Path(held.source)
            if not _inside(repo, self.out) or not is_git_source(repo) or repo.is_file():
                continue
            if _has_commit(repo, task.base_commit) or _fetch(repo, Path(src), task.base_commit):
                return repo.relative_to(self.out.resolve()).as_posix()
        if src not in copies:
            copies[src] = _copy(Path(src), self.out / "repos").relative_to(self.out).as_posix()
        return copies[src]


def _copy(src: Path, parent: Path) -> Path:
    """Copies a repository (folder or bundle) into ``parent`` under a name not yet taken."""
    name, n = src.name, 1
    while (parent / name).exists():
        n += 1
        name = f"{src.name}-{n}"
    parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        shutil.copytree(src, parent / name, symlinks=True)
    else:
        shutil.copy2(src, parent / name)
    return parent / name


def _free_id(instance_id: str, taken: set[str]) -> str:
    n = 2
    while f"{instance_id}-{n}" in taken:
        n += 1
    return f"{instance_id}-{n}"


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return True


def _has_commit(repo: Path, commit: str) -> bool:
    out = run_git(repo, "cat-file", "-t", commit, check=False).strip()
    return out == "commit"


def _fetch(repo: Path, source: Path, commit: str) -> bool:
    """Fetches the candidates' branches of ``source`` into ``repo``; True once it holds
    ``commit``."""
    if not is_git_source(source):
        return False
    run_git(repo, "fetch", "--quiet", "--no-tags", str(source),
            "+refs/heads/repogym/*:refs/heads/repogym/*", check=False)
    return _has_commit(repo, commit)
