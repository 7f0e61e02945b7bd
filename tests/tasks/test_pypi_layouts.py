"""`repogym tasks add pypi` keeps tasks from package-index projects whose tests live in
different places: inside the package, beside a ``src/`` layout, under a ``testpaths`` setting.

Each run derives its tasks' lists from the whole suite (no test file is known yet), so the
canaries must be planted where each project's run collects; before that was so, every
candidate of such a project was rejected. Needs the package index (sdists and the projects'
dependencies); without it the test skips, except in CI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from repogym.suite import load_suite

pytestmark = [pytest.mark.docker, pytest.mark.slow]

PROJECTS = {
    "sniffio==1.3.1": "tests inside the package (sniffio/_tests/, a package), no configuration",
    "cachetools==8.0.2": "src/ layout, tests/ at the root",
    "humanize==4.17.0": 'src/ layout, testpaths = ["src", "tests"] in pyproject.toml',
}
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"


@pytest.mark.parametrize("requirement", sorted(PROJECTS))
def test_package_index_projects_keep_tasks(requirement: str, tmp_path: Path) -> None:
    out = tmp_path / "suite"
    env = dict(os.environ)
    if "REPOGYM_CA_BUNDLE" not in env and Path(CA_BUNDLE).exists():  # as the Makefile does
        env["REPOGYM_CA_BUNDLE"] = CA_BUNDLE
    repogym = Path(sys.executable).with_name("repogym")
    proc = subprocess.run(
        [str(repogym), "tasks", "add", "pypi", requirement, "--kinds", "synthetic",
         "--no-gold-cases", "--no-certify", "--out", str(out), "--max", "2", "--runs", "1"],
        capture_output=True, text=True, env=env, timeout=900)
    if "could not download the sdist" in proc.stderr + proc.stdout:
        message = f"the package index is out of reach: {proc.stderr[-300:]}"
        pytest.fail(message) if os.environ.get("CI") else pytest.skip(message)
    report = json.loads((out / "report.json").read_text())
    tasks = load_suite(out)
    assert report["kept"] >= 1 and len(tasks) == report["kept"], (
        PROJECTS[requirement], report["candidates"], proc.stderr[-2000:])
    assert all(t.FAIL_TO_PASS and t.PASS_TO_PASS for t in tasks)
