"""``report.html``: one self-contained page (inline CSS and SVG, no script, nothing fetched),
so it opens from disk in any browser and can be mailed or archived as it is."""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from typing import Any

from repogym.agents.evaluation.report_detail import (
    anchor,
    detail_html,
    task_detail,
    write_record_pages,
)
from repogym.agents.evaluation.summary import failure_kind

GREEN, RED, GREY, BLUE = "#2e7d32", "#c62828", "#9e9e9e", "#1565c0"
PHASES = (("reset", "#90caf9"), ("agent", "#ffb74d"), ("env", "#a5d6a7"), ("grading", "#ce93d8"))
LABEL_W, BAR_W, ROW_H = 220, 420, 22
CSS = """body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1100px}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ddd;padding:3px 8px;
font-size:13px;text-align:left}th{background:#f5f5f5}.ok{color:#2e7d32}.bad{color:#c62828}
.err{color:#9e9e9e}svg text{font-size:12px;font-family:system-ui,sans-serif}h2{margin-top:1.6em}
pre{background:#f7f7f7;padding:8px;overflow-x:auto;white-space:pre-wrap;font-size:12px}
details{margin:4px 0}details>*:not(summary){margin-left:1.2em}"""


def rate_chart(groups: dict[str, dict[str, Any]]) -> str:
    """Horizontal bars of resolved rate per group, with the 95% Wilson interval as whiskers."""
    if not groups:
        return "<p>No graded tasks.</p>"
    height = ROW_H * len(groups) + 30
    parts = [_axis(height - 22, [(i / 4, f"{i * 25}%") for i in range(5)])]
    for i, (name, g) in enumerate(groups.items()):
        y = 4 + i * ROW_H
        value = g["rate"] or 0.0
        lo, hi = g["ci95"]
        x0 = LABEL_W
        parts.append(_label(name, y))
        tip = f'{escape(name)}: {g["resolved"]}/{g["n"]}'
        parts.append(f'<rect x="{x0}" y="{y}" width="{value * BAR_W:.1f}" height="{ROW_H - 8}" '
                     f'fill="{BLUE}"><title>{tip}</title></rect>')
        mid = y + (ROW_H - 8) / 2
        parts.append(f'<line x1="{x0 + lo * BAR_W:.1f}" x2="{x0 + hi * BAR_W:.1f}" y1="{mid}" '
                     f'y2="{mid}" stroke="#000" stroke-width="1.5"/>')
        for end in (lo, hi):
            parts.append(f'<line x1="{x0 + end * BAR_W:.1f}" x2="{x0 + end * BAR_W:.1f}" '
                         f'y1="{mid - 4}" y2="{mid + 4}" stroke="#000"/>')
        parts.append(f'<text x="{x0 + BAR_W + 8}" y="{y + 11}">{value:.0%} '
                     f'({g["resolved"]}/{g["n"]})</text>')
    return _svg(LABEL_W + BAR_W + 110, height, parts)


def time_chart(rows: list[dict[str, Any]]) -> str:
    """One bar per task, longest first, split into reset / agent / env / grading time."""
    timed = [r for r in rows if (r.get("timings") or {}).get("total")]
    if not timed:
        return "<p>No timings.</p>"
    timed.sort(key=lambda r: -float(r["timings"]["total"]))
    longest = max(float(r["timings"]["total"]) for r in timed)
    scale = BAR_W / longest
    height = ROW_H * len(timed) + 50
    digits = 1 if longest < 20 else 0
    ticks = [(f / 4, f"{longest * f / 4:.{digits}f} s") for f in range(5)]
    parts = [_axis(height - 42, ticks)]
    for i, row in enumerate(timed):
        y = 4 + i * ROW_H
        color = _status_color(row)
        parts.append(_label(row["instance_id"], y, color))
        x = float(LABEL_W)
        t = row["timings"]
        for phase, fill in PHASES:
            width = float(t.get(phase) or 0.0) * scale
            parts.append(f'<rect x="{x:.1f}" y="{y}" width="{width:.1f}" height="{ROW_H - 8}" '
                         f'fill="{fill}"><title>{phase}: {float(t.get(phase) or 0):.1f} s'
                         '</title></rect>')
            x += width
        parts.append(f'<text x="{LABEL_W + float(t["total"]) * scale + 6:.1f}" y="{y + 11}">'
                     f'{float(t["total"]):.1f} s</text>')
    legend_y = height - 12
    for j, (phase, fill) in enumerate(PHASES):
        lx = LABEL_W + j * 95
        parts.append(f'<rect x="{lx}" y="{legend_y - 9}" width="10" height="10" fill="{fill}"/>'
                     f'<text x="{lx + 14}" y="{legend_y}">{phase}</text>')
    return _svg(LABEL_W + BAR_W + 80, height, parts)


def _svg(width: int, height: int, parts: list[str]) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}">' + "".join(parts) + "</svg>")


def _axis(y: int, ticks: list[tuple[float, str]]) -> str:
    out = [f'<line x1="{LABEL_W}" x2="{LABEL_W + BAR_W}" y1="{y}" y2="{y}" stroke="#999"/>']
    for frac, text in ticks:
        x = LABEL_W + frac * BAR_W
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="0" y2="{y}" stroke="#eee"/>'
                   f'<text x="{x:.1f}" y="{y + 14}" text-anchor="middle">{escape(text)}</text>')
    return "".join(out)


def _label(text: str, y: int, color: str = "#222") -> str:
    short = text if len(text) <= 32 else text[:30] + "…"
    return (f'<text x="{LABEL_W - 6}" y="{y + 11}" text-anchor="end" fill="{color}">'
            f'<title>{escape(text)}</title>{escape(short)}</text>')


def _status_color(row: dict[str, Any]) -> str:
    if row.get("error_kind"):
        return GREY
    return GREEN if row.get("resolved") else RED


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.1%}"


def _task_rows(rows: list[dict[str, Any]], out_dir: Path, pages: dict[str, str]
               ) -> list[list[str]]:
    table = []
    for r in sorted(rows, key=lambda r: r["instance_id"]):
        status = ("error" if r.get("error_kind") else "resolved" if r.get("resolved")
                  else "unresolved")
        css = {"error": "err", "resolved": "ok", "unresolved": "bad"}[status]
        record = pages.get(r["instance_id"]) or (
            _href(Path(r["record"]), out_dir) if r.get("record") else "")
        link = f'<a href="{escape(record)}">record</a>' if record else ""
        total = (r.get("timings") or {}).get("total")
        name = f'<a href="#{anchor(r["instance_id"])}">{escape(r["instance_id"])}</a>'
        table.append([name, escape(str(r.get("repo", ""))),
                      escape(str(r.get("kind", ""))), f'<span class="{css}">{status}</span>',
                      f'{float(r.get("reward") or 0):.3f}', str(r.get("steps", "")),
                      "" if total is None else f"{float(total):.1f}",
                      escape(failure_kind(r) or ""), escape(str(r.get("error") or "")[:160]), link])
    return table


def _href(path: Path, out_dir: Path) -> str:
    """A link that still works when the run folder is moved or copied as a whole."""
    try:
        return path.resolve().relative_to(out_dir.resolve()).as_posix()
    except ValueError:
        return path.resolve().as_uri()


def render_html(summary: dict[str, Any], rows: list[dict[str, Any]], config: dict[str, Any],
                out_dir: Path, problems: dict[str, str] | None = None,
                patches: dict[str, str] | None = None, pages: dict[str, str] | None = None
                ) -> str:
    """The page. ``problems`` and ``patches`` (by instance id) fill the task details where the
    records cannot (a predictions run has none); ``pages`` links readable records."""
    problems, patches, pages = problems or {}, patches or {}, pages or {}
    title = f"repogym eval: {config.get('agent', '?')} on {config.get('suite', '?')}"
    lo, hi = summary["resolved_ci95"]
    head = _table(["resolved", "rate", "95% CI", "mean reward", "counted", "excluded",
                   "tasks/min"], [[
                       str(summary["resolved"]), _pct(summary["resolved_rate"]),
                       f"{lo:.1%} – {hi:.1%}",
                       "–" if summary["mean_reward"] is None else f"{summary['mean_reward']:.3f}",
                       str(summary["n_counted"]),
                       str(sum(len(v) for v in summary["excluded"].values())),
                       "–" if not summary.get("tasks_per_minute")
                       else f"{summary['tasks_per_minute']:.2f}"]])
    sections = [("Resolved rate by repository", rate_chart(summary["by_repo"])),
                ("Resolved rate by task kind", rate_chart(summary["by_kind"])),
                ("Time per task", time_chart(rows))]
    if summary["mean_components"]:
        sections.append(("Reward components (means)", _table(["component", "mean"], [
            [escape(k), f"{v:.3f}"] for k, v in summary["mean_components"].items()])))
    sections.append(("Failures by kind", _table(["failure", "tasks"], [
        [escape(k), str(v)] for k, v in summary["failures"].items()])
        if summary["failures"] else "<p>None: every counted task was resolved.</p>"))
    if rows:
        sections.append(("Tasks", _table(["task", "repo", "kind", "status", "reward", "steps",
                                           "seconds", "failure", "error", "record"],
                                          _task_rows(rows, out_dir, pages))))
        details = [detail_html(r, task_detail(r, patches.get(r["instance_id"])),
                               problems.get(r["instance_id"]), pages.get(r["instance_id"]),
                               _href(Path(r["record"]), out_dir) if r.get("record") else None)
                   for r in sorted(rows, key=lambda r: r["instance_id"])]
        sections.append(("Task details", "<p>The hidden tests' verdicts, the patch, the problem "
                         "statement and the episode of each task.</p>" + "".join(details)))
    sections.append(("Configuration", _table(["setting", "value"], [
        [escape(k), escape(_setting(v))] for k, v in sorted(config.items())
        if k != "versions"])))
    body = "".join(f"<h2>{escape(name)}</h2>{html}" for name, html in sections)
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>{escape(title)}</title>
<style>{CSS}</style></head><body><h1>{escape(title)}</h1>{head}
<p>Tasks whose episode failed for infrastructure reasons (Docker, sandbox, image build, grader)
or because the task is malformed are not counted in the rate.</p>
{body}</body></html>
"""


def _setting(value: Any) -> str:
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, sort_keys=True) if value else "–"
    return "–" if value is None or value == "" else str(value)


def write_html(path: Path, summary: dict[str, Any], rows: list[dict[str, Any]],
               config: dict[str, Any], problems: dict[str, str] | None = None,
               patches: dict[str, str] | None = None) -> Path:
    """Writes the report, and a readable page next to each episode record it links."""
    pages = write_record_pages(rows, path.parent)
    path.write_text(render_html(summary, rows, config, path.parent, problems, patches, pages),
                    encoding="utf-8")
    return path
