"""The report of a dataset run (``repogym swebench run``): every instance with its verdict or
its reason, the reasons counted, what the run cost, the agreement with swebench's
``run_instance``, and the disk the images take (shared layers counted once).

``OUT/report.json`` holds all of it; ``OUT/report.md`` is the same for people.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from repogym.images import usage as image_usage
from repogym.sandbox.client import docker_client
from repogym.tasks.variants import KINDS


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 1) if values else None


def _sum(records: list[dict[str, Any]], stage: str) -> float:
    return round(sum(float((r.get(stage) or {}).get("seconds") or 0) for r in records), 1)


def costs(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Seconds per stage in all and per instance, and the own layers' sizes."""
    built = [r for r in records if r.get("build", {}).get("own_mb") is not None]
    fresh = [r["build"]["seconds"] for r in built if not r["build"].get("cached")]
    agree = [float(v.get("repogym_seconds", 0)) + float(v.get("swebench_seconds", 0))
             for r in records for v in (r.get("agreement") or {}).values()]
    total = _sum(records, "build") + _sum(records, "validate") + sum(agree)
    return {
        "build_seconds": _sum(records, "build"), "fresh_builds": len(fresh),
        "build_seconds_fresh_median": _median(fresh),
        "validate_seconds": _sum(records, "validate"),
        "agreement_seconds": round(sum(agree), 1),
        "seconds": round(total, 1),
        "seconds_per_instance": round(total / len(records), 1) if records else None,
        "own_mb_median": _median([r["build"]["own_mb"] for r in built]),
        "own_mb_max": max((r["build"]["own_mb"] for r in built), default=None),
    }


def agreement(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Per prediction kind: how many verdicts were compared, how many agree, and each
    difference (or failure to grade) by instance."""
    out: dict[str, Any] = {}
    rechecked = {r["instance_id"]: r["recheck"] for r in records if r.get("recheck")}
    for kind in KINDS:
        rows = [(r["instance_id"], r["agreement"][kind]) for r in records
                if kind in (r.get("agreement") or {}) and "skipped" not in r["agreement"][kind]]
        out[kind] = {
            "compared": len(rows), "same": sum(1 for _, v in rows if v.get("same")),
            "differ": {iid: {k: v.get(k) for k in ("repogym", "swebench", "repogym_error",
                                                   "swebench_error", "repogym_invalid")}
                       | ({"recheck": rechecked[iid]} if iid in rechecked else {})
                       for iid, v in rows if not v.get("same")},
        }
    return out


def disk(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Bytes the built images take together, every shared layer (bases, environment images)
    counted once; images that are gone (pruned) are counted as missing."""
    tags = {r["build"]["image"] for r in records if r.get("build", {}).get("image")}
    envs = {r["build"]["env_image"] for r in records if r.get("build", {}).get("env_image")}
    client = docker_client()
    present = [i for i in image_usage.repogym_images(client) if set(i.tags) & tags]
    found = {t for i in present for t in i.tags}
    return {"task_images": len(tags), "present": len(present),
            "missing": sorted(tags - found), "environment_images": len(envs),
            "bytes": image_usage.disk_use(client, present) if present else 0}


def summarize(records: list[dict[str, Any]], with_disk: bool = True) -> dict[str, Any]:
    verdicts = Counter(r.get("verdict") for r in records)
    reasons = Counter(r.get("reason_kind", "?") for r in records
                      if r.get("verdict") in ("rejected", "error"))
    repos: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        repos[r["repo"]].append(r)
    by_repo = {repo: {"instances": len(rs), "kept": sum(r.get("verdict") == "kept" for r in rs),
                      "build_s_median": _median([r["build"]["seconds"] for r in rs
                                                 if "own_mb" in r.get("build", {})]),
                      "own_mb_median": _median([r["build"]["own_mb"] for r in rs
                                                if "own_mb" in r.get("build", {})]),
                      "validate_s_median": _median([r["validate"]["seconds"] for r in rs
                                                    if "validate" in r])}
               for repo, rs in sorted(repos.items())}
    return {"instances": len(records), "kept": verdicts.get("kept", 0),
            "rejected": verdicts.get("rejected", 0), "errors": verdicts.get("error", 0),
            "reasons": dict(reasons.most_common()), "by_repo": by_repo, "costs": costs(records),
            "agreement": agreement(records), "disk": disk(records) if with_disk else None}


def _mark(value: Any) -> str:
    return "?" if value is None else ("R" if value else "-")


def markdown(summary: dict[str, Any], records: list[dict[str, Any]]) -> str:
    c, d = summary["costs"], summary["disk"]
    lines = [f"# {summary['instances']} instances: {summary['kept']} kept, "
             f"{summary['rejected']} rejected, {summary['errors']} infrastructure failures", ""]
    if summary["reasons"]:
        lines += ["| reason | instances |", "| --- | --- |"]
        lines += [f"| {k} | {n} |" for k, n in summary["reasons"].items()] + [""]
    lines += [f"Cost: {c['seconds']:.0f} s in all ({c['seconds_per_instance']} s per instance): "
              f"build {c['build_seconds']:.0f} s ({c['fresh_builds']} fresh, median "
              f"{c['build_seconds_fresh_median']} s), validation {c['validate_seconds']:.0f} s, "
              f"agreement {c['agreement_seconds']:.0f} s. Own layer per task image: median "
              f"{c['own_mb_median']} MB, largest {c['own_mb_max']} MB."]
    if d:
        lines += [f"Disk: {d['bytes'] / 1e9:.2f} GB for {d['present']} task images and their "
                  f"{d['environment_images']} environment images, shared layers counted once"
                  + (f" ({len(d['missing'])} images pruned since)" if d["missing"] else "")
                  + "."]
    lines += ["", "| repository | instances | kept | build s (median) | own MB (median) | "
              "validate s (median) |", "| --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {repo} | {v['instances']} | {v['kept']} | {v['build_s_median']} | "
              f"{v['own_mb_median']} | {v['validate_s_median']} |"
              for repo, v in summary["by_repo"].items()]
    agree = summary["agreement"]
    lines += ["", "Agreement with swebench's run_instance (same image): "
              + ", ".join(f"{k} {v['same']}/{v['compared']}" for k, v in agree.items()), ""]
    lines += ["| instance | verdict | build s | own MB | validate s | "
              + " | ".join(KINDS) + " |", "| --- " * (5 + len(KINDS)) + "|"]
    for r in records:
        verdict = (f"kept ({r['F2P']} F2P, {r['P2P']} P2P"
                   + (f", {len(r['dropped'])} dropped" if r.get("dropped") else "")
                   + (f"; gold {r['recheck']['gold_resolved']}/{r['recheck']['gold_runs']} "
                      "validated again" if (r.get("recheck") or {}).get("gold_runs") else "")
                   + ")"
                   if r.get("verdict") == "kept"
                   else f"{r.get('verdict')}: {r.get('reason', '')[:160]}".replace("|", "/"))
        build, val = r.get("build") or {}, r.get("validate") or {}
        cells = []
        for kind in KINDS:
            v = (r.get("agreement") or {}).get(kind)
            cells.append("" if v is None else "." if "skipped" in v else
                         f"{'=' if v.get('same') else '!'}{_mark(v.get('repogym'))}/"
                         f"{_mark(v.get('swebench'))}")
        lines.append(f"| {r['instance_id']} | {verdict} | {build.get('seconds', '')} | "
                     f"{build.get('own_mb', '')} | {val.get('seconds', '')} | "
                     + " | ".join(cells) + " |")
    lines += ["", "Agreement marks: `=` same verdict, `!` different; `R` resolved, `-` not, "
              "`?` not graded; repogym/swebench; `.` the gold patch allows no such change."]
    return "\n".join(lines) + "\n"


def write_report(out: Path, records: list[dict[str, Any]], config: dict[str, Any],
                 with_disk: bool = True) -> dict[str, Any]:
    summary = summarize(records, with_disk)
    (out / "report.json").write_text(json.dumps(
        {"config": config, "summary": summary, "instances": records}, indent=1,
        default=str) + "\n", encoding="utf-8")
    (out / "report.md").write_text(markdown(summary, records), encoding="utf-8")
    return summary
