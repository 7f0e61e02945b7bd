"""The wheel builds without setuptools' package-data warnings and carries the suites' data."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheel_is_quiet_and_holds_the_suites(tmp_path: Path) -> None:
    had_build = (ROOT / "build").exists()
    try:
        done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                               "--no-build-isolation", "-w", str(tmp_path), str(ROOT)],
                              capture_output=True, text=True, timeout=300)
    finally:
        if not had_build:  # setuptools builds in the checkout
            shutil.rmtree(ROOT / "build", ignore_errors=True)
    assert done.returncode == 0, done.stderr[-2000:]
    output = done.stdout + done.stderr
    assert "is absent from the `packages` configuration" not in output
    [wheel] = tmp_path.glob("repogym-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    tracked = subprocess.run(["git", "ls-files", "tasks/demo/src", "tasks/demo/defs",
                              "tasks/demo/tasks.jsonl", "tasks/adversarial/tasks.jsonl",
                              "tasks/data"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    assert len(tracked) > 50
    missing = [p for p in tracked if f"repogym/{p}" not in names]
    assert not missing, missing
    scripts = subprocess.run(["git", "ls-files", "envs/*.sh"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
    assert scripts and not [p for p in scripts if f"repogym/{p}" not in names]
    assert "repogym/py.typed" in names and not any("__pycache__" in n for n in names)
