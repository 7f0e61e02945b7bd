"""`repogym tasks add ... --ray local`: candidates checked by actors of a private Ray cluster
started for the run, each with a checker of its own (its node's Docker engine). Until this test,
the path was never run: it imported a module that had moved (``repogym.agents.ray_runner``)
and failed at once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repogym.scripts.cli import main
from repogym.suite import load_suite

pytestmark = [pytest.mark.docker, pytest.mark.slow]

LIBRARY = '''\
"""Words."""


def shout(text):
    if not text:
        return ""
    return text.upper() + "!"


def initials(name):
    parts = name.split()
    return "".join(p[0].upper() for p in parts)
'''
TESTS = '''\
from words import initials, shout


def test_shout():
    assert shout("hi") == "HI!"


def test_shout_empty():
    assert shout("") == ""


def test_initials():
    assert initials("ada lovelace") == "AL"
'''


def test_tasks_add_checks_candidates_on_a_local_ray_cluster(tmp_path: Path) -> None:
    pytest.importorskip("ray", reason="pip install 'repogym[ray]'")
    root = tmp_path / "words"
    (root / "tests").mkdir(parents=True)
    (root / "words.py").write_text(LIBRARY)
    (root / "tests" / "test_words.py").write_text(TESTS)
    out = tmp_path / "suite"
    code = main(["tasks", "add", "synthetic", str(root), "--out", str(out), "--max", "2",
                 "--runs", "1", "--ray", "local", "--workers", "1", "--no-certify",
                 "--no-gold-cases"])
    report = json.loads((out / "report.json").read_text())
    assert code == 0, report["candidates"]
    assert report["config"]["check"]["ray"] == "local"
    assert report["checking"]["workers"] == 1  # the actors' summary came back
    tasks = load_suite(out)
    assert tasks and len(tasks) == report["kept"]
    assert all(t.FAIL_TO_PASS and t.source for t in tasks)
