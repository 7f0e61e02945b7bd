"""The evaluation runner: every task of a suite, N episodes at once, resumable, reported.

A run folder holds:

- ``config.json``: the :class:`EvalConfig`, the versions of everything involved (repogym,
  swebench, gymnasium, Docker engine, Python), image digests and task hashes. It is written
  before the first episode, so even a crashed run can be repeated with ``--rerun``.
- ``results.jsonl``: one line per task, appended as tasks finish. A rerun into the same folder
  skips the tasks already there (tasks that failed for infrastructure reasons run again).
- ``summary.json``, ``report.html``: written at the end (see
  :mod:`repogym.agents.evaluation.summary`).
- ``records/``: one episode record per task (see ``record_dir`` of the environment).

Local runs use one thread per worker, each with its own environment and agent; ``ray=ADDRESS``
spreads the same workers over a Ray cluster (:mod:`repogym.agents.evaluation.ray_runner`).
"""

from __future__ import annotations

import functools
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from repogym.agents.evaluation.console import Quiet, Reporter
from repogym.agents.evaluation.episode import EnvFactory, EpisodeWorker, Worker, ensure_image_locked
from repogym.agents.evaluation.html_report import write_html
from repogym.agents.evaluation.predictions import (
    PredictionWorker,
    load_predictions,
    system_folders,
    systems,
    write_swebench_reports,
)
from repogym.agents.evaluation.ray_runner import run_on_ray
from repogym.agents.evaluation.rows import ResultRow
from repogym.agents.evaluation.summary import summarize
from repogym.agents.registry import agent_class, make_agent
from repogym.envs.grading.rewards import REWARDS
from repogym.envs.record import versions
from repogym.errors import RepogymError, TaskError
from repogym.images.repository import image_tag
from repogym.sandbox.client import use_engine_of
from repogym.schema import Task
from repogym.suite import ALL, load_suite, select

RESULTS, SUMMARY, CONFIG, REPORT = "results.jsonl", "summary.json", "config.json", "report.html"
SECRET_WORDS = ("key", "token", "secret", "password")
# settings that may change between a run and its resumption without changing its results
RESUMABLE = {"workers", "ray", "out", "retries", "retry_backoff", "pool_size"}


@dataclass(frozen=True)
class EvalConfig:
    """One evaluation run. ``repogym eval`` maps its flags onto these fields."""

    suite: str  # a built-in suite name, a .jsonl file or a suite folder
    agent: str = "gold"  # a name from repogym.agents.registry.AGENTS or "module:Class"
    agent_options: dict[str, Any] = field(default_factory=dict)  # constructor keywords
    split: str | None = None  # train/eval/adversarial/all; None: a suite's eval tasks, or all given
    task_ids: tuple[str, ...] = ()  # only these instance ids (all when empty)
    workers: int | None = None  # episodes at once; None: 1 locally, every CPU slot on Ray
    out: str = "runs/eval"  # the run folder
    reward: str = "binary"  # the environment's reward function
    max_steps: int = 50  # steps per episode before truncation
    max_seconds: float = 1800.0  # wall time per episode before truncation
    retries: int = 2  # retries of an episode after an infrastructure failure
    retry_backoff: float = 2.0  # seconds before the first retry (then 2x, 3x, ...)
    record: bool = True  # write an episode record per task under out/records
    pool_size: int | None = None  # None: the process's shared pool (a spare per image in use)
    ray: str | None = None  # "local", "auto" or a cluster address: run on Ray
    predictions: str | None = None  # grade this SWE-bench predictions file instead of an agent
    model: str | None = None  # only this system's predictions (None: every system, each a run)
    backend: str | None = None  # the sandbox backend (docker, podman, ...); None: REPOGYM_BACKEND

    def __post_init__(self) -> None:
        if not self.suite:
            raise ValueError("EvalConfig.suite is empty: give a suite name or path")
        if self.workers is not None and self.workers < 1:
            raise ValueError(f"workers={self.workers}: use 1 or more")
        if self.retries < 0 or self.retry_backoff < 0:
            raise ValueError(f"retries={self.retries}, retry_backoff={self.retry_backoff}: "
                             "use values >= 0")
        if self.max_steps < 1 or self.max_seconds <= 0:
            raise ValueError(f"max_steps={self.max_steps}, max_seconds={self.max_seconds}: "
                             "use positive budgets")
        if self.reward not in REWARDS:
            raise ValueError(f"reward={self.reward!r}: use one of {sorted(REWARDS)}")
        if self.predictions is None:
            agent_class(self.agent)  # an unknown name fails here, listing the valid ones

    def to_dict(self, redact: bool = True) -> dict[str, Any]:
        """JSON-ready; option values whose name looks like a credential are left out."""
        data = asdict(self)
        data["task_ids"] = list(self.task_ids)
        if redact:
            data["agent_options"] = {k: ("<redacted>" if _secret(k) else v)
                                     for k, v in self.agent_options.items()}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any], **changes: Any) -> EvalConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown EvalConfig fields {unknown}; valid: {sorted(known)}")
        data = {**data, **changes}
        data["task_ids"] = tuple(data.get("task_ids") or ())
        # a redacted credential comes back from the environment variables instead
        data["agent_options"] = {k: v for k, v in (data.get("agent_options") or {}).items()
                                 if v != "<redacted>"}
        return cls(**data)


def _secret(name: str) -> bool:
    return any(word in name.lower() for word in SECRET_WORDS)


# --- the run ---------------------------------------------------------------------------------


def run_eval(config: EvalConfig, tasks: list[Task] | None = None,
             env_factory: EnvFactory | None = None, progress: Reporter | None = None
             ) -> dict[str, Any]:
    """Runs (or resumes) ``config``; returns the summary also written to ``summary.json``.

    ``tasks`` replaces the suite's tasks; ``env_factory`` replaces the SWE environment (tests
    use a tiny purpose-built one).
    """
    progress = progress or Quiet()
    if config.predictions and config.model is None:
        if len(systems(config.predictions)) > 1:  # one run per system, in folders of their own
            return run_systems(config, tasks, env_factory, progress)
    tasks = select_tasks(config, tasks)  # a bad suite, split or id fails before any file
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    _check_same_run(out, config)
    if config.backend:  # the images this process builds go where the envs run
        use_engine_of(config.backend)
    done = read_results(out / RESULTS)
    todo = [t for t in tasks if t.instance_id not in done
            or done[t.instance_id].get("error_kind") == "infrastructure"]
    make_worker = _worker_factory(config, tasks, env_factory)
    if config.predictions:
        predictions = load_predictions(config.predictions, config.model)
        todo = [t for t in todo if t.instance_id in predictions]
    write_config(out, config, tasks)
    if not config.ray and env_factory is None:
        prebuild(todo, progress)
    progress.start(len(todo), len(tasks) - len(todo))
    started = time.monotonic()
    lock = threading.Lock()
    with (out / RESULTS).open("a", encoding="utf-8") as sink:
        def on_result(row: ResultRow) -> None:
            with lock:
                sink.write(json.dumps(row, default=str) + "\n")
                sink.flush()
                progress.result(row)

        try:
            if config.ray:
                run_on_ray(config.ray, config.workers, make_worker, todo, on_result,
                           progress.message, retries=config.retries)
            else:
                run_threads(config.workers or 1, make_worker, todo, on_result)
        finally:
            progress.close()
    return finalize(out, config, tasks, time.monotonic() - started, len(todo))


def _worker_factory(config: EvalConfig, tasks: list[Task], env_factory: EnvFactory | None
                    ) -> Callable[[], Worker]:
    if config.predictions:
        return functools.partial(PredictionWorker, config,
                                 load_predictions(config.predictions, config.model))
    make_agent(config.agent, tasks, **config.agent_options)  # bad options fail before any work
    return functools.partial(EpisodeWorker, config, tasks, env_factory)


def run_threads(workers: int, make_worker: Callable[[], Worker], tasks: list[Task],
                on_result: Callable[[ResultRow], None]) -> None:
    """``workers`` threads, each with its own worker (environment and agent)."""
    local = threading.local()
    made: list[Worker] = []
    lock = threading.Lock()

    def work(task: Task) -> ResultRow:
        worker = getattr(local, "worker", None)
        if worker is None:
            worker = local.worker = make_worker()
            with lock:
                made.append(worker)
        return worker.run(task)

    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="repogym-eval")
    try:
        for future in as_completed([pool.submit(work, t) for t in tasks]):
            on_result(future.result())
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        for worker in made:
            worker.close()


def prebuild(tasks: list[Task], progress: Reporter) -> None:
    """Builds each image once before the episodes start, so the first episodes do not wait on
    each other. A failure here is not fatal: the episode fails again, is retried and reported."""
    seen: set[str] = set()
    for task in tasks:
        try:
            tag = image_tag(task)
            if tag in seen:
                continue
            seen.add(tag)
            built = ensure_image_locked(task)
        except RepogymError as exc:
            progress.message(f"image for {task.instance_id} failed: {str(exc)[:300]}")
            continue
        if not built.cached:
            progress.message(f"built {built.tag} in {built.seconds:.0f} s")


def select_tasks(config: EvalConfig, tasks: list[Task] | None = None) -> list[Task]:
    """The tasks to run: by default a suite's eval split (training tasks are no measure), or
    every task given; then only ``config.task_ids`` when set."""
    split = config.split or (ALL if tasks is not None else "eval")
    if tasks is not None:
        return select(list(tasks), split, config.task_ids, where="the tasks given")
    return select(load_suite(config.suite), split, config.task_ids,
                  where=f"suite {config.suite!r}")


# --- files -----------------------------------------------------------------------------------


def read_results(path: Path) -> dict[str, dict[str, Any]]:
    """Rows by instance id; a later line for the same id wins (a retried task)."""
    rows: dict[str, dict[str, Any]] = {}
    if not path.exists():
        return rows
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short by a crash: that task simply runs again
        if isinstance(row, dict) and "instance_id" in row:
            rows[row["instance_id"]] = row
    return rows


def write_config(out: Path, config: EvalConfig, tasks: list[Task],
                 images: dict[str, str] | None = None) -> dict[str, Any]:
    path = out / CONFIG
    old = json.loads(path.read_text()) if path.exists() else {}
    data = {
        "config": config.to_dict(),
        "versions": versions(),
        "images": {**old.get("images", {}), **(images or {})},
        "task_hashes": {t.instance_id: t.task_hash for t in tasks},
        "command": [os.path.basename(sys.argv[0]), *sys.argv[1:]],
        "written_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    _write_json(path, data)
    return data


def _check_same_run(out: Path, config: EvalConfig) -> None:
    """Resuming into a folder that holds another run would mix two runs' results."""
    path = out / CONFIG
    if not path.exists() or not (out / RESULTS).exists():
        return
    old = json.loads(path.read_text()).get("config", {})
    new = config.to_dict()
    changed = sorted(k for k in new if k not in RESUMABLE and old.get(k) != new[k])
    if changed:
        raise TaskError(
            f"{out} holds a run with other settings ({', '.join(changed)}): pass another --out, "
            "or the same settings to resume it."
        )


def finalize(out: Path, config: EvalConfig, tasks: list[Task], wall_seconds: float,
             n_run: int) -> dict[str, Any]:
    """Rewrites results.jsonl (one line per task), then summary.json and report.html."""
    by_id = read_results(out / RESULTS)
    _write_lines(out / RESULTS, list(by_id.values()))
    ids = {t.instance_id for t in tasks}
    rows = [by_id[t.instance_id] for t in tasks if t.instance_id in by_id]
    summary = summarize(rows, wall_seconds, n_run)
    summary.update(agent=None if config.predictions else config.agent, suite=config.suite,
                   out=str(out), n_suite=len(tasks), n_missing=len(ids - set(by_id)))
    images = {r["image"]: r["image_id"] for r in rows if r.get("image") and r.get("image_id")}
    write_config(out, config, tasks, images)
    patches: dict[str, str] = {}
    if config.predictions:
        predictions = load_predictions(config.predictions, config.model)
        summary["model"] = config.model or next(
            (str(p.get("model_name_or_path")) for p in predictions.values()), None)
        summary["swebench_report"] = str(write_swebench_reports(out, tasks, predictions, rows))
        patches = {k: str(v.get("model_patch") or "") for k, v in predictions.items()}
    _write_json(out / SUMMARY, summary)
    write_html(out / REPORT, summary, rows, config.to_dict(),
               problems={t.instance_id: t.problem_statement for t in tasks}, patches=patches)
    return summary


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
    os.replace(tmp, path)


def _write_lines(path: Path, rows: list[dict[str, Any]]) -> None:
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(json.dumps(r, default=str) + "\n" for r in rows), encoding="utf-8")
    os.replace(tmp, path)


def rerun(run_dir: str | Path, out: str | None = None, progress: Reporter | None = None,
          env_factory: EnvFactory | None = None) -> dict[str, Any]:
    """Repeats the run recorded in ``run_dir/config.json`` into ``out`` (default: a new folder
    next to it). Warns when a task changed since."""
    if not (Path(run_dir) / CONFIG).is_file():
        raise TaskError(f"{run_dir} holds no {CONFIG}: give a run folder that "
                        "`repogym eval` wrote.")
    data = json.loads((Path(run_dir) / CONFIG).read_text())
    target = out or f"{str(run_dir).rstrip('/')}-rerun-{time.strftime('%Y%m%d-%H%M%S')}"
    config = EvalConfig.from_dict(data["config"], out=target)
    progress = progress or Quiet()
    then = data.get("task_hashes", {})
    now = {t.instance_id: t.task_hash for t in select_tasks(config)}
    changed = sorted(i for i in now if i in then and then[i] != now[i])
    if changed:
        progress.message(f"warning: {len(changed)} tasks changed since the run: {changed[:5]}")
    return run_eval(config, env_factory=env_factory, progress=progress)


def run_systems(config: EvalConfig, tasks: list[Task] | None, env_factory: Any,
                progress: Any) -> dict[str, Any]:
    """Grades every system of a predictions file, each as its own run in ``OUT/<system>``
    (results, summary, report and the harness's reports, resumable alone), and writes
    ``OUT/summary.json`` with every system's summary; returns that."""
    out = Path(config.out)
    names = systems(str(config.predictions))
    folders = system_folders(names)
    runs: dict[str, dict[str, Any]] = {}
    for name in names:
        if hasattr(progress, "message"):
            progress.message(f"system {name or '<unnamed>'} -> {out / folders[name]}")
        one = replace(config, model=name, out=str(out / folders[name]))
        runs[name] = run_eval(one, tasks, env_factory, progress)
    excluded: dict[str, list[str]] = {}
    for name, run in runs.items():
        for kind, ids in run.get("excluded", {}).items():
            excluded.setdefault(kind, []).extend(f"{folders[name]}/{i}" for i in ids)
    summary = {"systems": runs, "out": str(out), "suite": config.suite,
               "predictions": config.predictions, "excluded": excluded}
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True,
                                                 default=str) + "\n")
    return summary
