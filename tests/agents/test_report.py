"""report.html tells what happened in each task: the hidden tests' verdicts with the failing
ones, the patch, the problem statement, and a readable page per episode record."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from repogym.agents.evaluation.html_report import write_html
from repogym.agents.evaluation.summary import summarize
from repogym.envs.record import EpisodeRecorder

PATCH = ("diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1 +1 @@\n"
         "-a - b\n+a + b\n")


def record(folder: Path, task_id: str, f2p: dict[str, str], patch: str) -> str:
    rec = EpisodeRecorder(folder, task_id, 1, "t")
    rec.write("reset", task_id=task_id, task_hash="h", seed=0, observation="Fix <add>.",
              image="img")
    rec.write("step", step=1, seconds=0.1, raw_action="{}", observation="1 failed",
              parsed={"name": "bash", "arguments": {"command": "pytest -q"}},
              info={"exit_code": 1, "action_error": None})
    rec.write("step", step=2, seconds=0.0, raw_action="nonsense", parsed=None,
              observation="No tool call found: write <tool_call>...</tool_call>",
              info={"action_error": "No tool call found"})
    rec.write("end", reward=0.0, reward_components={"resolved": 0.0}, flags=[], patch=patch,
              grading={"fail_to_pass": f2p, "pass_to_pass": {"t::keep": "PASSED"},
                       "log_tail": "E   assert -1 == 5", "invalid_reasons": [],
                       "stripped": {}}, truncation=None, n_steps=2)
    rec.close()
    return str(rec.path)


def row(task_id: str, resolved: bool, rec: str | None, **kw: Any) -> dict[str, Any]:
    return {"instance_id": task_id, "repo": "o/r", "kind": "swe", "resolved": resolved,
            "reward": float(resolved), "steps": 2, "record": rec, "error_kind": None,
            "reward_components": {"resolved": float(resolved), "patch_applied": 1.0},
            "timings": {"total": 1.0}, **kw}


def test_each_task_has_its_verdict_patch_statement_and_readable_record(tmp_path: Path) -> None:
    records = tmp_path / "records"
    failing = record(records, "o__r-1", {"t::add": "FAILED", "t::neg": "PASSED"}, PATCH)
    passing = record(records, "o__r-2", {"t::add": "PASSED"}, PATCH)
    rows = [row("o__r-1", False, failing), row("o__r-2", True, passing)]
    html = write_html(tmp_path / "report.html", summarize(rows), rows, {"agent": "a"},
                      problems={"o__r-1": "add(2, 3) returns -1 <not 5>"}).read_text()
    one = html[html.index('<details id="task-o__r-1">'):html.index('<details id="task-o__r-2">')]
    assert "FAIL_TO_PASS 1/2, PASS_TO_PASS 1/1" in one
    assert "<code>t::add</code>" in one and "t::neg" not in one  # only the failing tests
    assert "add(2, 3) returns -1 &lt;not 5&gt;" in one  # the problem statement, escaped
    assert "+a + b" in one and "assert -1 == 5" in one  # the patch and the log's end
    assert 'href="#task-o__r-1"' in html  # the task table links to it
    page = Path(failing).with_suffix(".html")
    assert f'href="records/{page.name}"' in one
    text = page.read_text()
    assert "<b>bash</b>" in text and "pytest -q" in text and "1 failed" in text
    assert "(unparsed)" in text and "action error" in text and '{"event"' not in text
    assert "Every hidden test passed" in html[html.index('<details id="task-o__r-2">'):]
    assert "<script" not in html and not re.search(r'(src|href)="https?:', html)


def test_no_empty_tables(tmp_path: Path) -> None:
    rows = [row("o__r-1", True, None, reward_components={})]
    html = write_html(tmp_path / "report.html", summarize(rows), rows, {"agent": "a"}).read_text()
    for table in re.findall(r"<table>.*?</table>", html):
        assert table.count("<tr>") >= 2, table  # a header and at least one row
    assert "Reward components" not in html and "None: every counted task was resolved" in html


def test_a_predictions_run_shows_the_harness_verdict_and_the_patch(tmp_path: Path) -> None:
    status = {"FAIL_TO_PASS": {"success": [], "failure": ["t::add"]},
              "PASS_TO_PASS": {"success": ["t::keep"], "failure": []}}
    rows = [row("o__r-1", False, None, swebench={"tests_status": status})]
    html = write_html(tmp_path / "report.html", summarize(rows), rows, {"agent": None},
                      patches={"o__r-1": PATCH}).read_text()
    assert "FAIL_TO_PASS 0/1, PASS_TO_PASS 1/1" in html and "<code>t::add</code>" in html
    assert "+a + b" in html
