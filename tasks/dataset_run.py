"""A published dataset built, validated and graded whole (``repogym swebench run``).

Each instance goes through three stages, and what each cost is kept:

1. **build**: the task from the dataset's spec (:class:`repogym.tasks.sources.swebench.
   SwebenchSource`), its image on the shared environment image of its repository and version
   (:mod:`repogym.images.env_image`): seconds, whether it was cached, its own layer's size.
2. **validate**: the source's check (leak guard, gold resolves and the empty patch does not,
   tests that need the network or flip between runs left out with their reason): kept, or the
   reason it is not.
3. **agree**: a kept task graded by repogym's grader and by swebench's own ``run_instance``
   on the same image, with the gold patch, the empty patch, and the near misses the gold patch
   allows (:mod:`repogym.tasks.variants`).

The state is one JSON file per instance under ``OUT/instances/`` written when a stage ends, so
an interrupted run resumes where it stopped: a finished instance is not done again, a kept one
gets only the agreement kinds it lacks, an infrastructure failure is tried again, and an
earlier rejection only when ``retry`` names its kind (or ``all``). Kept tasks are written as a
suite (``OUT/tasks.jsonl``, pointing at the mirrors), ready for ``repogym eval``; the report
(:mod:`repogym.tasks.dataset_report`) lists every instance.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from repogym.envs.grading.grader import Grader, GraderConfig
from repogym.envs.grading.official import run_official
from repogym.errors import RepogymError, UsageError
from repogym.images.env_image import env_tag, is_shared
from repogym.images.repository import ensure_image, image_tag
from repogym.sandbox.client import docker_client
from repogym.schema import Task
from repogym.tasks.flaky import without_flaky
from repogym.tasks.sources.common import Rejected, SourceOptions, reason_kind
from repogym.tasks.sources.swebench import SwebenchOptions, SwebenchSource, setup_reason
from repogym.tasks.validate import error_reason, validate_task
from repogym.tasks.variants import KINDS, predictions
from repogym.version import describe as repogym_version

INSTANCES, TASKS, LOCK = "instances", "tasks.jsonl", ".lock"
RECHECK_RUNS = 4  # runs a side when the official harness disagrees on gold or empty
Log = Callable[[str], None]


@dataclass(frozen=True)
class RunOptions:
    """One run over a dataset file; ``repogym swebench run`` maps its flags onto these."""

    file: Path  # the instances (JSON, JSON Lines, parquet...)
    out: Path  # the run folder: state, suite and report
    repos: Path | None = None  # mirrors (see repogym.tasks.sources.mirrors)
    env: Path | None = None  # YAML environments by repository and version (default: specs)
    instances: tuple[str, ...] = ()  # only these instance ids
    repositories: tuple[str, ...] = ()  # only the instances of these owner/name repositories
    workers: int = 1  # instances at once
    runs: int = 2  # test runs per side in validation (what flips is flaky)
    kinds: tuple[str, ...] = KINDS  # the agreement's predictions; () for none
    retry: tuple[str, ...] = ()  # rejection kinds to try again, or "all"
    clone: bool = False  # clone repositories the mirrors lack

    def __post_init__(self) -> None:
        if self.workers < 1 or self.runs < 1:
            raise ValueError(f"workers={self.workers}, runs={self.runs}: give 1 or more.")
        unknown = set(self.kinds) - set(KINDS)
        if unknown:
            raise ValueError(f"agreement kinds {sorted(unknown)}: use some of {list(KINDS)}.")
        if not self.file.exists():
            raise ValueError(f"{self.file} does not exist: give the dataset file.")


class State:
    """The run folder's per-instance records (one JSON file each, replaced whole)."""

    def __init__(self, out: Path) -> None:
        self.folder = out / INSTANCES
        self.folder.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def path(self, instance_id: str) -> Path:
        return self.folder / f"{instance_id}.json"

    def read(self, instance_id: str) -> dict[str, Any] | None:
        path = self.path(instance_id)
        try:
            return dict(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            return None

    def write(self, record: dict[str, Any]) -> None:
        path = self.path(record["instance_id"])
        tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(record, indent=1, sort_keys=True, default=str) + "\n",
                       encoding="utf-8")
        with self._lock:
            os.replace(tmp, path)

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """The folder for this process alone while the block runs: two runs in one folder
        would validate the same instance at once and write over each other's records. The
        lock is the kernel's (``flock``), so a run that was killed leaves none behind."""
        path = self.folder.parent / LOCK
        with open(path, "a+", encoding="utf-8") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                pid = handle.read().strip() or "another process"
                raise UsageError(
                    f"{self.folder.parent} is in use by a run still going on (process {pid}): "
                    "wait for it to end, or stop it (kill -TERM, and it ends the instances "
                    "under way), then run the same command again; give another --out for a "
                    "separate run") from None
            handle.seek(0)
            handle.truncate()
            handle.write(f"{os.getpid()}\n")
            handle.flush()
            try:
                yield
            finally:
                handle.seek(0)
                handle.truncate()
                fcntl.flock(handle, fcntl.LOCK_UN)

    def all(self) -> list[dict[str, Any]]:
        records = []
        for path in sorted(self.folder.glob("*.json")):
            try:
                records.append(json.loads(path.read_text(encoding="utf-8")))
            except ValueError:
                continue
        return records


def needs(record: dict[str, Any] | None, options: RunOptions) -> str | None:
    """What an instance still needs (``build``, ``agree``) or None when it is done."""
    if record is None or record.get("verdict") in (None, "error"):
        return "build"
    if record["verdict"] == "rejected":
        kind = record.get("reason_kind", "")
        return "build" if "all" in options.retry or kind in options.retry else None
    done = record.get("agreement") or {}
    return "agree" if any(k not in done for k in options.kinds) else None


class DatasetRun:
    """One run (see the module docstring)."""

    def __init__(self, options: RunOptions, log: Log = print) -> None:
        self.options, self.log = options, log
        self.out = options.out.resolve()
        self.state = State(self.out)
        self.source = SwebenchSource(
            SwebenchOptions(options.file, options.repos, options.env,
                            instances=options.instances, clone=options.clone),
            SourceOptions(runs=options.runs))
        self.grader = Grader(GraderConfig(cleanup_async=False))

    def candidates(self) -> list[Task | Rejected]:
        wanted = set(self.options.repositories)
        out = []
        for candidate in self.source.candidates():
            if not wanted or repo_of(candidate) in wanted:
                out.append(candidate)
        return out

    def run(self) -> list[dict[str, Any]]:
        """Every instance that needs work, ``workers`` at once; returns every record."""
        with self.state.held():
            return self._run()

    def _run(self) -> list[dict[str, Any]]:
        candidates = self.candidates()
        todo = [(c, self.state.read(c.instance_id)) for c in candidates]
        todo = [(c, r) for c, r in todo if needs(r, self.options)]
        self.log(f"{len(candidates)} instances, {len(candidates) - len(todo)} done already, "
                 f"{len(todo)} to do, {self.options.workers} at a time")
        start = time.monotonic()
        pool = ThreadPoolExecutor(max_workers=self.options.workers)
        futures = [pool.submit(self.one, c, r) for c, r in todo]
        built = 0  # instances that got as far as a build (not those with no mirror or spec)
        try:
            for n, future in enumerate(as_completed(futures), 1):
                record = future.result()
                built += "build" in record
                elapsed = time.monotonic() - start
                self.log(f"[{n}/{len(todo)}] {summary_line(record)} "
                         f"({elapsed / max(1, built):.0f} s per built instance so far)")
        except BaseException:
            # Ctrl-C (or a bug): no new instance starts; those under way end their stage
            # (each stage's record is written as it ends), and the same command goes on
            self.log("stopping: the instances under way finish; run the same command again "
                     "to go on")
            pool.shutdown(wait=True, cancel_futures=True)  # the folder stays held till then
            raise
        pool.shutdown()
        records = [r for c in candidates if (r := self.state.read(c.instance_id))]
        # the suite is the folder's: a run limited to some instances keeps the others' tasks
        write_tasks(self.out, self.state.all())
        (self.out / "config.json").write_text(json.dumps(
            {**asdict(self.options), "repogym": repogym_version()}, indent=1, default=str) + "\n")
        return records

    # --- one instance ---------------------------------------------------------------------

    def one(self, candidate: Task | Rejected, record: dict[str, Any] | None) -> dict[str, Any]:
        """One instance's stages. An error nobody foresaw (a bug) ends this instance, recorded
        as an ``error`` with its type and message (the next run tries it again), never the
        run: astropy__astropy-14182's mirror lacked a blob, git's failure went up unhandled and
        stopped 2 workers and the 200 instances after them."""
        try:
            return self._one(candidate, record)
        except Exception as exc:  # noqa: BLE001 - recorded, and the run goes on
            record = {**(self.state.read(candidate.instance_id) or {}),
                      "instance_id": candidate.instance_id, "repogym": repogym_version(),
                      "repo": repo_of(candidate)}
            self.finish(record, None, f"infrastructure: unexpected {type(exc).__name__} (a bug "
                        f"in repogym): {str(exc).splitlines()[0][:300] if str(exc) else ''}")
            return record

    def _one(self, candidate: Task | Rejected, record: dict[str, Any] | None) -> dict[str, Any]:
        iid = candidate.instance_id
        if record is None or needs(record, self.options) == "build":
            record = {"instance_id": iid, "repogym": repogym_version(), "repo": repo_of(candidate),
                      "version": getattr(candidate, "version", None)}
            if isinstance(candidate, Rejected):
                self.finish(record, None, candidate.reason)
                return record
            task = self.build_and_validate(candidate, record)
        else:
            task = Task.from_dict(record["task"])
        if task is not None and self.options.kinds:
            self.agree(task, record)
            if "recheck" not in record and differs(record):
                again = self.recheck(task, record)
                if again is not None and again != task:  # tests left the lists: graded anew
                    record["agreement"] = {}
                    self.agree(again, record)
        return record

    def build_and_validate(self, task: Task, record: dict[str, Any]) -> Task | None:
        self.log(f"{task.instance_id}: building")
        start = time.monotonic()
        try:
            built = ensure_image(task, progress=lambda _m: None)
        except RepogymError as exc:
            record["build"] = {"seconds": round(time.monotonic() - start, 1)}
            self.finish(record, None, setup_reason(task, error_reason(exc)))
            return None
        record["build"] = {"seconds": round(time.monotonic() - start, 1), "cached": built.cached,
                           "image": built.tag, **layer_sizes(built.tag),
                           "env_image": env_tag(task) if is_shared(task.environment) else None}
        self.state.write(record)
        self.log(f"{task.instance_id}: validating (image {'cached' if built.cached else 'built'} "
                 f"in {record['build']['seconds']:.0f} s, own layer "
                 f"{record['build']['own_mb']} MB)")
        start = time.monotonic()
        try:
            kept, reason = self.source.check(task)
        except RepogymError as exc:
            kept, reason = None, error_reason(exc)
        record["validate"] = {"seconds": round(time.monotonic() - start, 1)}
        return self.finish(record, kept, reason)

    def finish(self, record: dict[str, Any], task: Task | None, reason: str) -> Task | None:
        if task is not None:
            record.update(verdict="kept", reason=reason, task=task.to_dict(),
                          F2P=len(task.FAIL_TO_PASS), P2P=len(task.PASS_TO_PASS),
                          dropped=task.extra.get("dropped_tests") or {},
                          flaky=task.extra.get("flaky_tests") or {})
            if "build" in record and image_tag(task) != record["build"].get("image"):
                # validated in another environment than the one first built (another Python)
                tag = ensure_image(task, progress=lambda _m: None).tag
                record["build"].update(image=tag, **layer_sizes(tag),
                                       env_image=env_tag(task) if is_shared(task.environment)
                                       else None)
        else:
            infra = reason.startswith("infrastructure")
            record.update(verdict="error" if infra else "rejected", reason=reason,
                          reason_kind=reason_kind(reason))
            record.pop("task", None)
        record["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%S")
        self.state.write(record)
        return task

    def agree(self, task: Task, record: dict[str, Any]) -> None:
        """repogym's verdict and ``run_instance``'s on the same image, per prediction kind."""
        done: dict[str, Any] = record.setdefault("agreement", {})
        patches = predictions(task)
        image = ensure_image(task, progress=lambda _m: None).tag
        for kind in self.options.kinds:
            if kind in done:
                continue
            patch = patches[kind]
            if patch is None:
                done[kind] = {"skipped": "the gold patch allows no such change"}
                continue
            self.log(f"{task.instance_id}: grading {kind} (repogym and run_instance)")
            done[kind] = self.grade_both(task, image, kind, patch)
            self.state.write(record)
        self.state.write(record)

    def recheck(self, task: Task, record: dict[str, Any]) -> Task | None:
        """The official harness saw gold or the empty patch otherwise: the task validated
        again with :data:`RECHECK_RUNS` runs a side, so a test that passes by chance shows
        (sympy__sympy-13146's FAIL_TO_PASS test fails in 6 runs of 10 with one hash seed; both
        validation runs passed, ``run_instance``'s failed). What flips leaves the lists as in
        validation; the instance is kept, kept with fewer tests, or rejected."""
        self.log(f"{task.instance_id}: the official harness disagrees: validating again "
                 f"({RECHECK_RUNS} runs a side)")
        start = time.monotonic()
        try:
            result = validate_task(task, runs=RECHECK_RUNS)
            kept, result = without_flaky(task, result, runs=RECHECK_RUNS)
        except RepogymError as exc:
            record["recheck"] = {"error": error_reason(exc)[:300]}
            self.state.write(record)
            return task
        record["recheck"] = {"runs": RECHECK_RUNS, "seconds": round(time.monotonic() - start, 1),
                             "gold_resolved": sum(result.gold_resolved),
                             "gold_runs": len(result.gold_resolved),
                             "flaky": sorted(result.flips)}
        if not result.ok:
            self.finish(record, None, f"{result.reason} (seen when validated again: the "
                                      "official harness disagreed)")
            return None
        if kept != task:
            left = (len(task.FAIL_TO_PASS) + len(task.PASS_TO_PASS)
                    - len(kept.FAIL_TO_PASS) - len(kept.PASS_TO_PASS))
            self.finish(record, kept, f"{record['reason']}; validated again (the official "
                                      f"harness disagreed): {left} flaky tests left the lists")
        else:
            self.state.write(record)
        return kept

    def grade_both(self, task: Task, image: str, kind: str, patch: str) -> dict[str, Any]:
        row: dict[str, Any] = {}
        start = time.monotonic()
        try:
            report = self.grader.grade(task, patch, image)
            row.update(repogym=report.resolved, repogym_flags=report.flag_names(),
                       repogym_invalid=report.invalid_reasons[:3])
        except RepogymError as exc:
            row.update(repogym=None, repogym_error=str(exc).splitlines()[0][:300])
        row["repogym_seconds"] = round(time.monotonic() - start, 1)
        start = time.monotonic()
        try:
            result = run_official(task, image, patch if kind != "empty" else None,
                                  self.out / "swebench", f"{kind}-{uuid.uuid4().hex[:6]}",
                                  timeout=int(max(600.0, 2 * task.environment.timeout)),
                                  network_mode="none", cpus=self.grader.config.cpus)
            row.update(swebench=result.resolved, swebench_log=str(result.log_dir))
        except Exception as exc:  # noqa: BLE001 - swebench's own failure is a row of the table
            row.update(swebench=None, swebench_error=f"{type(exc).__name__}: {exc}"[:300])
        row["swebench_seconds"] = round(time.monotonic() - start, 1)
        row["same"] = row.get("repogym") == row.get("swebench") and row["repogym"] is not None
        return row


def differs(record: dict[str, Any]) -> bool:
    """Whether the official harness graded gold or the empty patch otherwise than repogym
    (both graded; a near miss's difference is not a question of flaky tests)."""
    rows = record.get("agreement") or {}
    return any(rows.get(kind, {}).get("same") is False and rows[kind].get("repogym") is not None
               and rows[kind].get("swebench") is not None for kind in ("gold", "empty"))


def write_tasks(out: Path, records: list[dict[str, Any]]) -> Path:
    """The kept tasks of ``records`` as the folder's suite file (sources stay the mirrors'
    absolute paths)."""
    path = out / TASKS
    lines = [json.dumps(r["task"], sort_keys=True) for r in records
             if r.get("verdict") == "kept"]
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    os.replace(tmp, path)
    return path


def repo_of(candidate: Task | Rejected) -> str:
    """owner/name, from the instance id when the candidate was refused before it had one."""
    if isinstance(candidate, Task):
        return candidate.repo
    return candidate.instance_id.rsplit("-", 1)[0].replace("__", "/")


def layer_sizes(tag: str) -> dict[str, Any]:
    """The image's own layer (its last: the task's checkout and install) and its whole size,
    in MB."""
    client = docker_client()
    history = client.api.history(tag)
    size = client.images.get(tag).attrs.get("Size", 0)
    return {"own_mb": round(int(history[0].get("Size") or 0) / 1e6, 1),
            "size_mb": round(int(size) / 1e6, 1)}


def summary_line(record: dict[str, Any]) -> str:
    """One line per instance: its verdict or reason, and what it cost."""
    iid = record["instance_id"]
    cost = []
    if "build" in record:
        cost.append(f"build {record['build'].get('seconds', 0):.0f} s")
    if "validate" in record:
        cost.append(f"validate {record['validate']['seconds']:.0f} s")
    agreement = record.get("agreement") or {}
    graded = [v for v in agreement.values() if "same" in v]
    if graded:
        same = sum(1 for v in graded if v["same"])
        cost.append(f"agreement {same}/{len(graded)}")
    if record.get("verdict") == "kept":
        head = f"{iid}: kept ({record['F2P']} F2P, {record['P2P']} P2P"
        head += f", {len(record['dropped'])} dropped)" if record.get("dropped") else ")"
    else:
        head = f"{iid}: {record.get('verdict')}: {record.get('reason', '')[:300]}"
    return head + (f"; {', '.join(cost)}" if cost else "")
