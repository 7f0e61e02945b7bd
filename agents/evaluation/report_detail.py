"""What ``report.html`` says about each task, and the episode records as readable pages.

Per task: the hidden tests' verdicts (every failing FAIL_TO_PASS and PASS_TO_PASS test with its
status, and how many passed), the patch that was graded, the problem statement, the end of the
test log when the task was not resolved, and a link to its record. A record
(``records/*.jsonl``, one JSON object per line) gets a page of its own next to it
(``records/*.html``): every action with its arguments, every observation, then the verdict.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

from repogym.envs.record import read_record
from repogym.errors import UsageError

PASSING = {"PASSED", "XFAIL"}
MAX_TEXT = 200_000  # characters of a patch or an observation shown; the record keeps all


@dataclass
class Detail:
    """One task's verdict, read from its record's ``end`` event (or a predictions row)."""

    f2p: dict[str, str] = field(default_factory=dict)
    p2p: dict[str, str] = field(default_factory=dict)
    patch: str | None = None
    log_tail: str = ""
    invalid_reasons: list[str] = field(default_factory=list)
    stripped: dict[str, str] = field(default_factory=dict)


def task_detail(row: dict[str, Any], patch: str | None = None) -> Detail:
    """The record's verdict when the row has a record, else what the row holds itself."""
    end = _end_event(row.get("record"))
    if end is not None:
        grading = end.get("grading") or {}
        return Detail(f2p=dict(grading.get("fail_to_pass") or {}),
                      p2p=dict(grading.get("pass_to_pass") or {}), patch=end.get("patch"),
                      log_tail=str(grading.get("log_tail") or ""),
                      invalid_reasons=list(grading.get("invalid_reasons") or []),
                      stripped=dict(grading.get("stripped") or {}))
    status = (row.get("swebench") or {}).get("tests_status") or {}
    detail = Detail(patch=patch)
    for name, target in (("FAIL_TO_PASS", detail.f2p), ("PASS_TO_PASS", detail.p2p)):
        lists = status.get(name) or {}
        target.update({t: "PASSED" for t in lists.get("success", [])})
        target.update({t: "FAILED" for t in lists.get("failure", [])})
    return detail


def _end_event(record: str | None) -> dict[str, Any] | None:
    if not record or not Path(record).is_file():
        return None
    try:
        events = read_record(record)
    except UsageError:
        return None
    return next((e for e in reversed(events) if e["event"] == "end"), None)


def detail_html(row: dict[str, Any], detail: Detail, problem: str | None,
                record_page: str | None, raw_record: str | None) -> str:
    """A collapsible section for one task (its ``id`` is the task's anchor)."""
    f2p_ok = sum(s == "PASSED" for s in detail.f2p.values())
    p2p_ok = sum(s in PASSING for s in detail.p2p.values())
    status = ("error" if row.get("error_kind") else "resolved" if row.get("resolved")
              else "unresolved")
    counts = (f"FAIL_TO_PASS {f2p_ok}/{len(detail.f2p)}, PASS_TO_PASS {p2p_ok}/{len(detail.p2p)}"
              if detail.f2p or detail.p2p else "not graded")
    parts = [f'<details id="{anchor(row["instance_id"])}"><summary><b>'
             f'{escape(row["instance_id"])}</b>: {status}, {counts}</summary>']
    failing = ([["FAIL_TO_PASS", t, s] for t, s in sorted(detail.f2p.items()) if s != "PASSED"]
               + [["PASS_TO_PASS", t, s] for t, s in sorted(detail.p2p.items())
                  if s not in PASSING])
    if failing:
        body = "".join(f"<tr><td>{k}</td><td><code>{escape(t)}</code></td>"
                       f'<td class="bad">{escape(s)}</td></tr>' for k, t, s in failing)
        parts.append(f"<table><tr><th>list</th><th>failing test</th><th>status</th></tr>"
                     f"{body}</table>")
    elif detail.f2p or detail.p2p:
        parts.append('<p class="ok">Every hidden test passed.</p>')
    if row.get("error"):
        parts.append(f'<p class="err">{escape(str(row["error_kind"]))}: '
                     f'{escape(str(row["error"]))}</p>')
    for reason in detail.invalid_reasons:
        parts.append(f'<p class="bad">invalid run: {escape(reason)}</p>')
    if detail.stripped:
        paths = ", ".join(f"<code>{escape(p)}</code> ({escape(r)})"
                          for p, r in sorted(detail.stripped.items()))
        parts.append(f"<p>stripped from the patch: {paths}</p>")
    if problem:
        parts.append(_block("Problem statement", problem))
    if detail.patch is not None:
        lines = detail.patch.count("\n")
        parts.append(_block(f"Patch ({lines} lines)", detail.patch) if detail.patch.strip()
                     else "<p>The patch was empty.</p>")
    if detail.log_tail and not row.get("resolved"):
        parts.append(_block("End of the test log", detail.log_tail))
    links = []
    if record_page:
        links.append(f'<a href="{escape(record_page)}">the episode, step by step</a>')
    if raw_record:
        links.append(f'<a href="{escape(raw_record)}">raw record (JSON Lines)</a>')
    if links:
        parts.append("<p>" + " · ".join(links) + "</p>")
    return "".join(parts) + "</details>"


def anchor(instance_id: str) -> str:
    return "task-" + "".join(c if c.isalnum() or c in "-_." else "_" for c in instance_id)


def _block(title: str, text: str) -> str:
    return f"<details><summary>{escape(title)}</summary><pre>{escape(_cut(text))}</pre></details>"


def _cut(text: str) -> str:
    if len(text) <= MAX_TEXT:
        return text
    return text[:MAX_TEXT] + f"\n[... {len(text) - MAX_TEXT} more]"


# --- a record as a page -----------------------------------------------------------------------


def record_page(events: list[dict[str, Any]], title: str) -> str:
    """One episode: the prompt, each step's call and observation, then the verdict."""
    parts = [f"<h1>{escape(title)}</h1>"]
    for event in events:
        kind = event["event"]
        if kind == "reset":
            parts.append(f"<p>task <b>{escape(str(event.get('task_id')))}</b>, image "
                         f"<code>{escape(str(event.get('image')))}</code>, task hash "
                         f"<code>{escape(str(event.get('task_hash')))}</code></p>")
            parts.append(_block("Prompt", str(event.get("observation", ""))))
        elif kind == "step":
            parts.append(_step_html(event))
        elif kind == "end":
            parts.append(_end_html(event))
    return (f'<!doctype html><html><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f"<style>{PAGE_CSS}</style></head><body>{''.join(parts)}</body></html>\n")


PAGE_CSS = """body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1100px}
pre{background:#f7f7f7;padding:8px;overflow-x:auto;white-space:pre-wrap;font-size:12px}
.step{border-top:1px solid #ddd;margin-top:1em}.bad{color:#c62828}.ok{color:#2e7d32}
table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:3px 8px;font-size:13px}"""


def _step_html(event: dict[str, Any]) -> str:
    parsed = event.get("parsed") or {}
    info = event.get("info") or {}
    if parsed:
        args = json.dumps(parsed.get("arguments"), indent=2, ensure_ascii=False)
        call = f"<b>{escape(str(parsed.get('name')))}</b><pre>{escape(args)}</pre>"
    else:
        call = f"<b>(unparsed)</b><pre>{escape(str(event.get('raw_action', ''))[:4000])}</pre>"
    notes = [f"{float(event.get('seconds') or 0):.2f} s"]
    if info.get("exit_code") is not None:
        notes.append(f"exit {info['exit_code']}")
    if info.get("timed_out"):
        notes.append("timed out")
    error = ' <span class="bad">action error</span>' if info.get("action_error") else ""
    obs = _cut(str(event.get("observation", "")))
    return (f'<div class="step"><p>step {event.get("step")} ({", ".join(notes)}){error}</p>'
            f"{call}<pre>{escape(obs)}</pre></div>")


def _end_html(event: dict[str, Any]) -> str:
    comps = event.get("reward_components") or {}
    rows = "".join(f"<tr><td>{escape(k)}</td><td>{v}</td></tr>" for k, v in comps.items())
    parts = [f'<h2>Reward {event.get("reward")}</h2>']
    if rows:
        parts.append(f"<table><tr><th>component</th><th>value</th></tr>{rows}</table>")
    if event.get("flags"):
        parts.append(f'<p class="bad">flags: {escape(", ".join(event["flags"]))}</p>')
    if event.get("truncation"):
        parts.append(f"<p>truncated: {escape(str(event['truncation']))}</p>")
    if event.get("patch") is not None:
        parts.append(_block("Patch", str(event["patch"])))
    return "".join(parts)


def write_record_pages(rows: list[dict[str, Any]], out_dir: Path) -> dict[str, str]:
    """Writes ``X.html`` next to each row's record ``X.jsonl``; returns the page's link (from
    ``out_dir``) by instance id. A record that is missing or unreadable gets no page."""
    pages = {}
    for row in rows:
        record = row.get("record")
        if not record or not Path(record).is_file():
            continue
        try:
            events = read_record(record)
        except UsageError:
            continue
        page = Path(record).with_suffix(".html")
        page.write_text(record_page(events, f"{row['instance_id']}: episode record"),
                        encoding="utf-8")
        pages[row["instance_id"]] = _relative(page, out_dir)
    return pages


def _relative(path: Path, out_dir: Path) -> str:
    try:
        return path.resolve().relative_to(out_dir.resolve()).as_posix()
    except ValueError:
        return path.resolve().as_uri()
