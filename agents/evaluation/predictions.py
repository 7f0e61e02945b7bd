"""Grading SWE-bench predictions without an agent: ``repogym eval --predictions FILE``.

A predictions file is what SWE-bench's harness takes: a JSON list, a JSON object keyed by
instance id, or JSON Lines, of ``{"instance_id", "model_patch", "model_name_or_path"}``. Each
patch is graded by repogym's own :class:`~repogym.envs.grading.grader.Grader` on the task's
image, in parallel, with the same retries and failure kinds as agent runs. A file that holds
several systems (``model_name_or_path``) is graded system by system, each into a run folder of
its own (see :func:`repogym.agents.evaluation.runner.run_eval`). Besides the usual
``results.jsonl`` / ``summary.json`` / ``report.html``, the run folder gets the harness's report
formats: ``instance_reports.json`` (per instance, as in the harness's ``report.json``) and
``<model>.<run_id>.json`` (as ``make_run_report`` writes it).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repogym.agents.evaluation.episode import (
    base_row,
    ensure_image_locked,
    env_failure,
    with_retries,
)
from repogym.agents.evaluation.rows import ResultRow
from repogym.envs.grading.grader import Grader, GradingReport
from repogym.envs.grading.rewards import components, reward_fn
from repogym.errors import TaskError
from repogym.schema import Task

if TYPE_CHECKING:
    from repogym.agents.evaluation.runner import EvalConfig

PASSING = ("PASSED", "XFAIL")


def read_predictions(path: str | Path) -> list[dict[str, Any]]:
    """Every prediction of a file, in order (a JSON list, an object keyed by instance id, or
    JSON Lines)."""
    file = Path(path)
    if not file.exists():
        raise TaskError(f"predictions file {file} does not exist")
    text = file.read_text(encoding="utf-8")
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError:
        try:
            data = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as exc:
            raise TaskError(f"{file} is neither JSON nor JSON Lines ({exc})") from exc
    if isinstance(data, dict):
        data = [{"instance_id": k, **v} for k, v in data.items()] if all(
            isinstance(v, dict) for v in data.values()) and "instance_id" not in data else [data]
    for n, pred in enumerate(data):
        if not isinstance(pred, dict) or "instance_id" not in pred or "model_patch" not in pred:
            raise TaskError(f"{file}: prediction {n} lacks instance_id or model_patch")
    return list(data)


def system_of(pred: dict[str, Any]) -> str:
    return str(pred.get("model_name_or_path") or "")


def systems(path: str | Path) -> list[str]:
    """The systems (``model_name_or_path``) a file holds predictions of, in order."""
    return list(dict.fromkeys(system_of(p) for p in read_predictions(path)))


def load_predictions(path: str | Path, model: str | None = None) -> dict[str, dict[str, Any]]:
    """One system's predictions by instance id (a later one for the same id wins, as in the
    harness): ``model``'s, or the file's only system's. A file of several systems needs
    ``model``: keeping one prediction per id would silently drop the others."""
    found = read_predictions(path)
    names = list(dict.fromkeys(system_of(p) for p in found))
    if model is None and len(names) > 1:
        raise TaskError(f"{path} holds predictions of {len(names)} systems "
                        f"({', '.join(n or '<unnamed>' for n in names)}): grade one with "
                        "model=NAME, or all with `repogym eval --predictions FILE`, which "
                        "writes a run per system")
    if model is not None and model not in names:
        raise TaskError(f"{path} holds no predictions of {model!r}; it has "
                        f"{', '.join(n or '<unnamed>' for n in names)}")
    return {str(p["instance_id"]): p for p in found if model is None or system_of(p) == model}


def eval_tests_status(report: GradingReport) -> dict[str, dict[str, list[str]]]:
    """The harness's ``tests_status``; FAIL_TO_PASS counts only explicit passes, and nothing
    counts in a run the grader found invalid."""
    def split(statuses: dict[str, str], ok: tuple[str, ...]) -> dict[str, list[str]]:
        good = sorted(t for t, s in statuses.items() if s in ok and report.valid)
        return {"success": good, "failure": sorted(set(statuses) - set(good))}

    return {"FAIL_TO_PASS": split(report.fail_to_pass, ("PASSED",)),
            "PASS_TO_PASS": split(report.pass_to_pass, PASSING),
            "FAIL_TO_FAIL": {"success": [], "failure": []},
            "PASS_TO_FAIL": {"success": [], "failure": []}}


def instance_report(patch: str | None, report: GradingReport | None,
                    failure: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"patch_is_None": patch is None, "patch_exists": patch is not None,
                           "patch_successfully_applied": False, "resolved": False,
                           "infra_failure": failure is not None}
    if failure is not None:
        out["infra_failure_reason"] = failure
    if report is not None:
        out["patch_successfully_applied"] = report.patch_applied
        out["resolved"] = report.resolved
        out["tests_status"] = eval_tests_status(report)
    return out


class PredictionWorker:
    """Grades one prediction per call, in a fresh grading container."""

    def __init__(self, config: EvalConfig, predictions: dict[str, dict[str, Any]]) -> None:
        self.config, self.predictions = config, predictions
        self.grader = Grader()
        self.reward = reward_fn(config.reward)

    def run(self, task: Task) -> ResultRow:
        return with_retries(task, self.config.retries, self._grade, lambda: None,
                            self.config.retry_backoff)

    def _grade(self, task: Task) -> ResultRow:
        pred = self.predictions[task.instance_id]
        patch = pred.get("model_patch")
        row = base_row(task)
        row.update({"model": pred.get("model_name_or_path"),
                    "empty_patch": not (patch or "").strip()})
        start = time.monotonic()
        if row["empty_patch"]:  # as in the harness: nothing to grade
            row.update({"swebench": instance_report(patch, None), "timings": {"total": 0.0}})
            return row
        try:
            image = ensure_image_locked(task)
            report = self.grader.grade(task, str(patch), image.tag)
        except Exception as exc:  # noqa: BLE001 - sorted into a failure kind, never dropped
            raise env_failure(exc) from exc
        comps = components(report, 0, None)
        row.update({"resolved": report.resolved, "reward": float(self.reward(comps)),
                    "reward_components": comps, "flags": list(report.flags), "image": image.tag,
                    "timings": {"grading": report.total_seconds,
                                "total": time.monotonic() - start},
                    "swebench": instance_report(patch, report)})
        return row

    def close(self) -> None:
        pass


def write_swebench_reports(out: Path, tasks: list[Task], predictions: dict[str, dict[str, Any]],
                           rows: list[dict[str, Any]]) -> Path:
    """``instance_reports.json`` and the ``make_run_report``-style run report; returns the
    latter's path."""
    by_id = {r["instance_id"]: r for r in rows}
    instances = {}
    for iid, row in sorted(by_id.items()):
        failed = row.get("error_kind")
        instances[iid] = row.get("swebench") or instance_report(
            predictions.get(iid, {}).get("model_patch"), None,
            f"{failed}: {row.get('error')}" if failed else None)
    (out / "instance_reports.json").write_text(json.dumps(instances, indent=2, sort_keys=True))
    report = run_report(tasks, predictions, by_id)
    model = next(iter(predictions.values()), {}).get("model_name_or_path") or "model"
    path = out / f"{str(model).replace('/', '__')}.{out.name}.json"
    path.write_text(json.dumps(report, indent=4) + "\n")
    return path


def run_report(tasks: list[Task], predictions: dict[str, dict[str, Any]],
               rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The fields of swebench's ``make_run_report`` (schema_version 2)."""
    ids = {t.instance_id for t in tasks}
    empty = {i for i in ids & set(predictions) if predictions[i].get("model_patch") in ("", None)}
    errors = {i for i, r in rows.items() if r.get("error_kind")}
    graded = {i for i, r in rows.items() if i not in errors and i not in empty}
    resolved = {i for i in graded if rows[i].get("resolved")}
    infra = {i for i in errors if rows[i]["error_kind"] == "infrastructure"}
    incomplete = ids - set(predictions)
    return {
        "total_instances": len(ids),
        "submitted_instances": len(predictions),
        "completed_instances": len(graded),
        "resolved_instances": len(resolved),
        "unresolved_instances": len(graded - resolved),
        "infra_failure_instances": len(infra),
        "ambiguous_failure_instances": 0,
        "empty_patch_instances": len(empty),
        "error_instances": len(errors),
        "completed_ids": sorted(graded),
        "incomplete_ids": sorted(incomplete),
        "empty_patch_ids": sorted(empty),
        "submitted_ids": sorted(predictions),
        "resolved_ids": sorted(resolved),
        "unresolved_ids": sorted(graded - resolved),
        "infra_failure_ids": sorted(infra),
        "ambiguous_failure_ids": [],
        "failure_reasons": {i: str(rows[i].get("error")) for i in sorted(errors)},
        "error_ids": sorted(errors),
        "schema_version": 2,
    }


def system_folders(names: list[str]) -> dict[str, str]:
    """A folder name per system (its name with / as __, unique, never empty)."""
    out: dict[str, str] = {}
    for name in names:
        base = re.sub(r"[^\w.-]", "_", name.replace("/", "__")) or "unnamed"
        folder, n = base, 2
        while folder in out.values():
            folder, n = f"{base}-{n}", n + 1
        out[name] = folder
    return out
