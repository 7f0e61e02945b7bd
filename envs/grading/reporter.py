"""Test results that leave the test process as they are made, and what the grader reads of them.

The harness's pytest plugin (``harness_plugin.py``, loaded with ``-p`` before the repository's
code) writes one HMAC-signed record per test report to a FIFO; a root process in the grading
container (``collector.py``) keeps the records that verify. Each test run has its own key and
its own collector: the key reaches the plugin through a file it deletes at import, and the
collector is told to stop, with a token only root knows, after every process of the tests' user
has ended. See the manual's "Grading and safety" (docs/safety.md) for what this does and does
not defend.
"""

from __future__ import annotations

import base64
import json
import secrets
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repogym.envs.grading.stage import GRADE_DIR

PLUGIN = "_repogym_harness"
PLUGIN_DIR = f"{GRADE_DIR}/py"
FIFO = f"{GRADE_DIR}/rec.fifo"
HERE = Path(__file__).parent
# which run's FIFO and key file the plugin takes; unset: the first run's (the test run). The
# decoy run collects while the test run goes on, so each run has its own.
CHANNEL_VAR = "REPOGYM_CHANNEL"
# the decoy run's ids (JSON): of a hidden test function, only the named cases run there
DECOY_IDS_VAR = "REPOGYM_DECOY_IDS"
# a test run narrowed to these ids (JSON): in each file holding one, only the named tests run
KEEP_IDS_VAR = "REPOGYM_KEEP_IDS"


def upload() -> dict[str, str]:
    """Files for the staging upload (``GRADE_DIR/<name>``)."""
    return {f"py/{PLUGIN}.py": (HERE / "harness_plugin.py").read_text(encoding="utf-8"),
            "collector.py": (HERE / "collector.py").read_text(encoding="utf-8")}


def pytest_options(pass_hook: bool = True) -> list[str]:
    """What the test command gets: the plugin, and (unless the task's validation turned it off)
    rewritten assertions that show their operands on a pass too (the equality check reads
    them)."""
    return ["-p", PLUGIN, *(["-o", "enable_assertion_pass_hook=true"] if pass_hook else [])]


@dataclass(frozen=True)
class Channel:
    """One run's key and end token, and where its collector keeps its files."""

    run: int
    key: str = field(default_factory=lambda: secrets.token_hex(32), repr=False)
    end: str = field(default_factory=lambda: secrets.token_hex(16), repr=False)

    @property
    def folder(self) -> str:
        return f"{GRADE_DIR}/rec{self.run}"

    @property
    def suffix(self) -> str:
        return "" if self.run == 1 else str(self.run)

    @property
    def fifo(self) -> str:
        return f"{GRADE_DIR}/rec{self.suffix}.fifo"

    @property
    def key_file(self) -> str:
        return f"{GRADE_DIR}/out/key{self.suffix}"

    def env(self) -> dict[str, str]:
        """What the run's environment adds for its plugin to take this channel."""
        return {CHANNEL_VAR: self.suffix} if self.suffix else {}

    def start_script(self) -> str:
        """Root: the FIFO, the collector started in the background, the key where the plugin
        reads it (the folder of results, the tests' user's)."""
        d, fifo, key = self.folder, self.fifo, self.key_file
        return f"""mkdir -p {GRADE_DIR}/py {GRADE_DIR}/out && chmod 755 {GRADE_DIR} {GRADE_DIR}/py
[ -p {fifo} ] || {{ mkfifo -m 622 {fifo} && chown root:root {fifo}; }}
mkdir -m 700 {d} && mkfifo -m 600 {d}/tick
printf %s {self.key} > {d}/key; printf %s {self.end} > {d}/end
(umask 077; setsid python3 -I -S {GRADE_DIR}/collector.py {d} {fifo} </dev/null >{d}/log 2>&1 \
  & echo $! > {d}/pid)
printf %s {self.key} > {key}
chown 1000:1000 {key} 2>/dev/null; chmod 400 {key}
"""

    def stop_script(self) -> str:
        """Root, after the tests' user's processes ended: the end line, the collector's exit,
        its records (base64, one marker line). The wait for the collector's exit forks
        nothing: a 2 ms ``read`` on the channel's own FIFO, nobody's writer, is its sleep (the
        collector exits within milliseconds of the end line; 2 s at most)."""
        d = self.folder
        return f"""rm -f {self.key_file}
printf '\\nEND %s\\n' {self.end} > {self.fifo}
__rg_pid=; read -r __rg_pid < {d}/pid
for ((__i = 0; __i < 1000; __i++)); do kill -0 "$__rg_pid" 2>/dev/null || break
  read -r -t 0.002 _ <> {d}/tick; done
kill -9 "$__rg_pid" 2>/dev/null
printf '\\n__RG_RECORDS{self.run}=%s\\n' "$(base64 -w0 {d}/records.jsonl 2>/dev/null)"
"""

    def read(self, output: str) -> Records:
        marker = f"__RG_RECORDS{self.run}="
        lines = [ln for ln in output.splitlines() if ln.startswith(marker)]
        if not lines:
            return Records(error="the collector's records did not come back")
        text = base64.b64decode(lines[-1][len(marker):] or b"").decode("utf-8", "replace")
        return Records.parse(text)


@dataclass
class Records:
    """What one run's collector kept: statuses by node id, files that failed to collect or
    were skipped whole, the equality check's findings, and how many lines did not verify."""

    statuses: dict[str, str] = field(default_factory=dict)
    collection_errors: list[str] = field(default_factory=list)
    skipped_modules: list[str] = field(default_factory=list)  # skipped as a whole at import
    always_equal: dict[str, str] = field(default_factory=dict)  # node id: the type
    bad: int = 0
    ended: bool = False
    count: int = 0
    error: str = ""

    @classmethod
    def parse(cls, text: str) -> Records:
        out = cls()
        reports: list[dict[str, Any]] = []
        for line in text.splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                out.bad += 1
                continue
            if rec.get("end"):
                out.ended, out.bad = True, out.bad + int(rec.get("bad", 0))
            elif rec.get("k") == "r":
                reports.append(rec)
            elif rec.get("k") == "c" and rec.get("o") == "skipped":
                out.skipped_modules.append(str(rec.get("id", "")))
            elif rec.get("k") == "c":
                out.collection_errors.append(str(rec.get("id", "")))
            elif rec.get("k") == "eq":
                out.always_equal.setdefault(str(rec.get("id", "")), str(rec.get("t", "")))
        out.count = len(reports)
        # a module that failed to import is an error under its file's id, as in the log
        out.statuses = {**{e: "ERROR" for e in out.collection_errors}, **statuses(reports)}
        if not out.ended:
            out.error = "the collector did not finish"
        return out

    def problems(self) -> list[str]:
        """Why the records cannot be trusted, if they cannot."""
        out = [self.error] if self.error else []
        if self.bad:
            out.append(f"{self.bad} records of the test run did not verify (forged or "
                       "written to the harness's pipe by the code under test)")
        return out


def status_of(report: dict[str, Any]) -> str | None:
    """A report's status as the ``-rA`` summary gives it; None for a passed setup or teardown.
    A test marked xfail that passed (not strictly) is XPASS, not a pass: its project declares
    that it is expected to fail, pytest's exit status ignores it, and swebench's parsers leave
    it out (JUnit alone writes it as a pass)."""
    when, outcome, xfail = report.get("w"), report.get("o"), bool(report.get("x"))
    if outcome == "passed":
        return ("XPASS" if xfail else "PASSED") if when == "call" else None
    if outcome == "skipped":
        return "XFAIL" if xfail else "SKIPPED"
    return "FAILED" if when == "call" else "ERROR"


def statuses(reports: list[dict[str, Any]]) -> dict[str, str]:
    """Statuses by node id; of several reports for one test the worst counts (a pass then an
    error in teardown is an error), as in ``results.parse_junit``."""
    out: dict[str, str] = {}
    for report in reports:
        node, status = str(report.get("id", "")), status_of(report)
        if status is not None and out.get(node) in (None, "PASSED", "XPASS"):
            out[node] = status
    return out


def env_assignment() -> str:
    """``PYTHONPATH`` for a test command run by bash: the plugin's folder first."""
    return f"PYTHONPATH={shlex.quote(PLUGIN_DIR)}${{PYTHONPATH:+:$PYTHONPATH}}"
