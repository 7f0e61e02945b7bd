"""The manual's examples run, and every page of it is in the site's navigation (#35).

Every ``python``, ``console`` and ``bash`` block of README.md and docs/*.md runs here, against
the demo suite, in real Docker: a page's blocks in order, in one scratch folder that sees the
checkout's ``tasks/``, ``docs/`` and ``tools/`` (examples name ``tasks/demo/src/textkit``,
``docs/examples/`` and ``tools/corpus.py``), so a later block may use what an earlier one
wrote. A console block runs its ``$`` lines (a line ending in ``\\`` goes on); a command ending
in ``&`` runs in the background until the page's last block has run (its output redirected to a
file, as a reader would). A block that cannot run here (a GPU, a cluster, data from the
network) says why on the line above it: ``<!-- not run: why -->``. Blocks of other languages
(``text``, ``yaml``, ``json``) are output or files, not commands.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
RUN = {"python", "console", "bash"}
FENCE = re.compile(r"^(`{3,})(\w*)\s*$")
NOT_RUN = re.compile(r"^<!-- not run: (.+?) -->$")
MAX_README_LINES = 250
BLOCK_TIMEOUT = 900


@dataclass(frozen=True)
class Block:
    page: str  # relative to the checkout
    line: int
    lang: str
    code: str
    not_run: str | None  # the reason, when it cannot run here

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]


def blocks(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    out, i = [], 0
    while i < len(lines):
        opened = FENCE.match(lines[i])
        if not opened:
            i += 1
            continue
        fence, lang, start = opened.group(1), opened.group(2), i
        i += 1
        while i < len(lines) and lines[i].strip() != fence:
            i += 1
        above = lines[start - 1].strip() if start else ""
        reason = NOT_RUN.match(above)
        out.append(Block(path.relative_to(ROOT).as_posix(), start + 1, lang,
                         "\n".join(lines[start + 1:i]), reason.group(1) if reason else None))
        i += 1
    return out


def commands(console: str) -> list[str]:
    """The ``$`` lines of a console block, continuation lines joined."""
    out: list[str] = []
    going_on = False
    for line in console.splitlines():
        if going_on:
            out[-1] += "\n" + line
        elif line.startswith("$ "):
            out.append(line[2:])
        else:
            continue
        going_on = line.rstrip().endswith("\\")
    return out


def runnable(path: Path) -> list[Block]:
    return [b for b in blocks(path) if b.lang in RUN and b.not_run is None]


# ---------------------------------------------------------------------------- fast checks


def _nav_pages(entry: object) -> set[str]:
    if isinstance(entry, str):
        return {entry}
    if isinstance(entry, list):
        return set().union(*(_nav_pages(e) for e in entry)) if entry else set()
    if isinstance(entry, dict):
        return set().union(*(_nav_pages(v) for v in entry.values())) if entry else set()
    return set()


def test_every_page_of_docs_is_in_the_navigation() -> None:
    """A page added without wiring would be built but reachable from nowhere."""
    nav = _nav_pages(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"])
    missing = sorted(p.name for p in DOCS.glob("*.md") if p.name not in nav)
    assert not missing, (
        f"docs/{', docs/'.join(missing)} not in the navigation: add each to `nav:` in "
        "mkdocs.yml under the section of its topic, e.g. `- Grading speed: grading.md` under "
        "`Grading and safety` (README.md's list of links too, if it is a main topic).")


def test_the_readme_is_short_and_every_example_is_run_or_says_why() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines: move detail " \
        "into a page of docs/"
    every = [b for p in pages() for b in blocks(p) if b.lang in RUN]
    assert every and all(b.not_run is None or b.not_run.strip() for b in every)
    # the commands that made the benchmarks' figures are records, not examples to follow
    examples = [b for b in every if not (b.not_run or "").startswith("a measurement")]
    skipped = [b.where for b in examples if b.not_run]
    assert len(skipped) <= len(examples) // 4, f"too many examples are not run: {skipped}"
    for block in every:
        if block.lang == "console":
            assert commands(block.code), f"{block.where}: a console block with no `$ ` line"


def test_the_readme_shows_swebench_instances_and_mirrors_in_an_example_that_runs() -> None:
    """#35: `--instances` and `--repos` were only in `--help`."""
    shown = [c for b in runnable(ROOT / "README.md") if b.lang == "console"
             for c in commands(b.code) if "tasks add swebench" in c]
    assert any("--instances" in c and "--repos" in c for c in shown), shown


# ---------------------------------------------------------------------------- running them


def _script(block: Block) -> tuple[list[str], str]:
    """The argv and the file text that run one block."""
    if block.lang == "python":
        return [sys.executable, "example.py"], block.code + "\n"
    body = block.code if block.lang == "bash" else "\n".join(commands(block.code))
    # background servers outlive the block: the page's later blocks talk to them
    return ["bash", "example.sh"], (
        "set -eo pipefail\ntrap 'jobs -p >> .background' EXIT\n" + body + "\n")


def _stop_background(folder: Path) -> None:
    listed = folder / ".background"
    for pid in (int(x) for x in (listed.read_text().split() if listed.exists() else [])):
        for sig in (signal.SIGINT, signal.SIGKILL):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                break
            time.sleep(3 if sig == signal.SIGINT else 0)


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    host = Path("/etc/ssl/certs/ca-certificates.crt")  # builds reach the index as in make
    if not env.get("REPOGYM_CA_BUNDLE") and host.is_file():
        env["REPOGYM_CA_BUNDLE"] = str(host)
    env.pop("COLUMNS", None)
    return env


# each page its own group of pytest-xdist (tests/conftest.py would put the whole file in one):
# the pages spread over the test processes
PAGES_WITH_EXAMPLES = [pytest.param(page, marks=pytest.mark.xdist_group(f"docs:{page}"))
                       for page in (p.relative_to(ROOT).as_posix() for p in pages() if runnable(p))]


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("page", PAGES_WITH_EXAMPLES)
def test_the_examples_of_a_page_run(page: str, tmp_path: Path) -> None:
    for name in ("tasks", "docs", "tools"):
        (tmp_path / name).symlink_to(ROOT / name)
    env = _environment()
    try:
        _run_blocks(page, tmp_path, env)
    finally:
        _stop_background(tmp_path)


def _run_blocks(page: str, tmp_path: Path, env: dict[str, str]) -> None:
    for block in runnable(ROOT / page):
        argv, text = _script(block)
        (tmp_path / argv[1]).write_text(text)
        start = time.monotonic()
        try:
            done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True,
                                  timeout=BLOCK_TIMEOUT, stdin=subprocess.DEVNULL)
            print(f"{block.where}: {time.monotonic() - start:.1f} s (load "
                  f"{os.getloadavg()[0]:.1f})")
        except subprocess.TimeoutExpired as exc:
            pytest.fail(f"{block.where}: the example ran past {BLOCK_TIMEOUT} s: {exc.stdout!r}")
        assert done.returncode == 0, (
            f"{block.where}: the {block.lang} example exited {done.returncode}\n--- stdout\n"
            f"{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-4000:]}")


def test_the_navigation_leaves_out_pages_not_written_yet(tmp_path: Path) -> None:
    """Pages that other work will add are named in the navigation before they exist."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "tools/docs_hooks.py")
    assert spec is not None and spec.loader is not None
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    (tmp_path / "a.md").write_text("# a\n")
    (tmp_path / "c.md").write_text("# c\n")
    nav = [{"A": "a.md"}, {"S": [{"B": "b.md"}, {"C": "c.md"}]}, {"T": [{"D": "d.md"}]}]
    assert hooks._present(nav, tmp_path) == [{"A": "a.md"}, {"S": [{"C": "c.md"}]}]
