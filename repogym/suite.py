"""Suites: a ``.jsonl`` file of tasks, or a folder with ``tasks.jsonl`` and ``suite.yaml``."""

from __future__ import annotations

import difflib
import importlib.util
import json
import random
import shutil
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from repogym.errors import TaskError
from repogym.schema import SPLITS, Task


def _data_folder(package: str) -> Path:
    """Where ``package``'s files are, found without importing it (the built-in suites are
    data of ``repogym.tasks``, which this module sits below)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise TaskError(f"{package} is not installed: reinstall repogym (pip install repogym).")
    return Path(next(iter(spec.submodule_search_locations)))


_TASKS = _data_folder("repogym.tasks")
BUILTIN = {
    "demo": _TASKS / "demo",
    "adversarial": _TASKS / "adversarial",
    "demo-langs": _TASKS / "demo" / "langs",
}
ALL = "all"  # the split name that keeps every task


def suite_path(suite: str | Path) -> Path:
    """Resolves a built-in suite name, a ``.jsonl`` file or a suite folder."""
    if isinstance(suite, str) and suite in BUILTIN:
        return BUILTIN[suite]
    path = Path(suite).expanduser()
    if not path.exists():
        raise TaskError(
            f"suite {suite!r} is neither a built-in suite ({sorted(BUILTIN)}) nor an existing "
            "path: pass a .jsonl file or a folder holding tasks.jsonl."
        )
    return path


def load_suite(suite: str | Path, split: str | None = None) -> list[Task]:
    """Every task of ``suite``, or only those of ``split`` (``None`` or ``"all"``: every one).

    A split that leaves no task raises :class:`TaskError` naming the splits the suite holds.
    """
    path = suite_path(suite)
    defaults: dict[str, Any] = {}
    if path.is_dir():
        if (path / "suite.yaml").exists():
            defaults = yaml.safe_load((path / "suite.yaml").read_text()) or {}
        path = path / "tasks.jsonl"
        if not path.exists():
            raise TaskError(f"{path.parent} has no tasks.jsonl: a suite folder needs one.")
    tasks = [_with_defaults(row, defaults, path.parent) for row in _read_rows(path)]
    ids = [t.instance_id for t in tasks]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise TaskError(f"{path}: duplicate instance_id {dupes}: make them unique.")
    return select(tasks, split, where=f"suite {str(suite)!r}")


def load_suite_splits(suite: str | Path, split: str | None = None
                      ) -> tuple[list[Task], dict[str, str]]:
    """The tasks of ``split`` (as :func:`load_suite`), and the split of every task it leaves
    out, by id: so a task asked for by id can be found in the split that holds it."""
    every = load_suite(suite)
    chosen = select(every, split, where=f"suite {str(suite)!r}")
    kept = {t.instance_id for t in chosen}
    return chosen, {t.instance_id: t.split for t in every if t.instance_id not in kept}


def select(tasks: list[Task], split: str | None = None, task_ids: Iterable[str] = (),
           where: str = "the suite") -> list[Task]:
    """The tasks of ``split`` (``None`` or ``"all"``: every split), then only ``task_ids``
    when given. Raises :class:`TaskError` saying what there is when nothing would be left."""
    if split not in (None, ALL) and split not in SPLITS:
        raise TaskError(f"split={split!r}: use one of {', '.join((*SPLITS, ALL))}.")
    chosen = tasks if split in (None, ALL) else [t for t in tasks if t.split == split]
    if tasks and not chosen:
        held = Counter(t.split for t in tasks)
        have = ", ".join(f"{name}: {n}" for name, n in sorted(held.items()))
        raise TaskError(f"{where} has no {split!r} tasks (it holds {have}): choose split "
                        f"{' or '.join(repr(k) for k in sorted(held))}, or {ALL!r} for every "
                        "task.")
    wanted = list(dict.fromkeys(task_ids))
    if wanted:
        known = [t.instance_id for t in chosen]
        elsewhere = {t.instance_id: t.split for t in tasks}
        for task_id in wanted:
            if task_id not in known:
                raise TaskError(_no_such_task(task_id, known, where, split, elsewhere))
        chosen = [t for t in chosen if t.instance_id in set(wanted)]
    return chosen


def _no_such_task(task_id: str, known: list[str], where: str, split: str | None,
                  elsewhere: Mapping[str, str] | None = None) -> str:
    held = (elsewhere or {}).get(task_id)
    if held is not None and held != split:
        chosen = f"the {split!r} split" if split not in (None, ALL) else "the tasks chosen"
        return (f"task {task_id!r} is in split {held!r} of {where}, and this draws from "
                f"{chosen}: ask for split={held!r} (or {ALL!r} for every task), e.g. "
                f"gym.make('repogym/SWE-v0', suite=..., split={held!r}), or --split {held} on "
                "the command line.")
    close = difflib.get_close_matches(task_id, known, n=5, cutoff=0.3)
    among = "" if split in (None, ALL) else f" among its {split!r} tasks"
    return (f"no task {task_id!r} in {where}{among}; close matches: "
            f"{', '.join(close) if close else 'none'}.")


def _read_rows(path: Path) -> list[dict[str, Any]]:
    text = path.read_text()
    if path.suffix == ".json":
        data = json.loads(text)
        return data if isinstance(data, list) else [data]
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise TaskError(
                f"{path}:{n} is not valid JSON ({exc}): fix or remove that line."
            ) from exc
    return rows


def _with_defaults(row: dict[str, Any], defaults: dict[str, Any], base: Path) -> Task:
    merged = {**{k: v for k, v in defaults.items() if k != "environment"}, **row}
    env = {**(defaults.get("environment") or {}), **(row.get("environment") or {})}
    merged["environment"] = env
    return Task.from_dict(merged, base_dir=base)


def pick(tasks: list[Task], task_id: str | None, rng: random.Random,
         elsewhere: Mapping[str, str] | None = None, where: str = "this env's tasks",
         split: str | None = None) -> Task:
    """The task named ``task_id``, or one drawn with ``rng``. ``elsewhere``: the split of each
    task left out of ``tasks`` by id, to say where a task asked for is."""
    if not tasks:
        raise TaskError("the suite holds no task (check the split filter).")
    if task_id is None:
        return tasks[rng.randrange(len(tasks))]
    for task in tasks:
        if task.instance_id == task_id:
            return task
    raise TaskError(_no_such_task(task_id, [t.instance_id for t in tasks], where, split,
                                  elsewhere))


def write_suite(tasks: list[Task], out_dir: Path, copy_sources: bool = True) -> Path:
    """Writes ``out_dir/tasks.jsonl``, copying each source repository into ``out_dir/repos``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    copied: dict[str, str] = {}
    rows = []
    for task in tasks:
        row = task.to_dict()
        if copy_sources and task.source:
            src = Path(task.source).resolve()
            if str(src) not in copied:
                dest = out_dir / "repos" / _unique_name(src, out_dir / "repos")
                if src.resolve() != dest.resolve():
                    _copy(src, dest)
                copied[str(src)] = str(dest.relative_to(out_dir))
            row["source"] = copied[str(src)]
        rows.append(json.dumps(row, sort_keys=True))
    path = out_dir / "tasks.jsonl"
    path.write_text("\n".join(rows) + ("\n" if rows else ""))
    return path


def _unique_name(src: Path, parent: Path) -> str:
    name, n = src.name, 1
    while (parent / name).exists():
        n += 1
        name = f"{src.name}-{n}"
    return name


def _copy(src: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        shutil.copytree(src, dest, symlinks=True)
    else:
        shutil.copy2(src, dest)
