"""`repogym tasks add git` and `synthetic` on a small Go module made at test time: its
language and setup are detected, and the candidates are validated in Docker."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

CLAMP = """package clamp

// Clamp limits x to [lo, hi].
func Clamp(x, lo, hi int) int {
\tif x < lo {
\t\treturn lo
\t}
\tif x > hi {
\t\treturn hi
\t}
\treturn x
}

// Within says whether lo <= x <= hi.
func Within(x, lo, hi int) bool {
\treturn x >= lo && x <= hi
}
"""
CLAMP_TEST = """package clamp

import "testing"

func TestInside(t *testing.T) {
\tif Clamp(5, 0, 10) != 5 {
\t\tt.Fatal("inside")
\t}
}

func TestBelow(t *testing.T) {
\tif Clamp(-1, 0, 10) != 0 {
\t\tt.Fatal("below")
\t}
}

func TestWithin(t *testing.T) {
\tif !Within(0, 0, 10) || !Within(10, 0, 10) || Within(11, 0, 10) {
\t\tt.Fatal("within")
\t}
}
"""
ABOVE_TEST = """
func TestAbove(t *testing.T) {
\tif Clamp(11, 0, 10) != 10 {
\t\tt.Fatal("above")
\t}
}
"""


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                   check=True, capture_output=True)


def module(root: Path) -> Path:
    """Two commits: the first clamps below only, the second above too, with its test."""
    repo = root / "clamp"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "go.mod").write_text("module example.com/clamp\n\ngo 1.21\n")
    (repo / "clamp.go").write_text(CLAMP.replace("\tif x > hi {\n\t\treturn hi\n\t}\n", ""))
    (repo / "clamp_test.go").write_text(CLAMP_TEST)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "Clamp below")
    (repo / "clamp.go").write_text(CLAMP)
    (repo / "clamp_test.go").write_text(CLAMP_TEST + ABOVE_TEST)
    git(repo, "commit", "-q", "-am", "Clamp above too")
    return repo


def add(*args: str) -> dict[str, object]:
    out = Path(args[args.index("--out") + 1])
    proc = subprocess.run([sys.executable, "-m", "repogym", "tasks", "add", *args,
                           "--runs", "1", "--no-gold-cases", "--no-certify"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads((out / "report.json").read_text())


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.toolchain("go")
def test_go_module_mined_and_mutated(toolchain: Callable[[str], str], tmp_path: Path) -> None:
    toolchain("go")
    repo = module(tmp_path)
    add("git", str(repo), "--out", str(tmp_path / "mined"))
    task = json.loads((tmp_path / "mined" / "tasks.jsonl").read_text().splitlines()[0])
    assert task["environment"]["language"] == "go"
    assert task["FAIL_TO_PASS"] == ["TestAbove"]
    assert sorted(task["PASS_TO_PASS"]) == ["TestBelow", "TestInside", "TestWithin"]

    add("synthetic", str(repo), "--out", str(tmp_path / "bugs"), "--max", "1",
        "--operators", "swap_boolean_operator")  # Within's &&: one candidate, one image
    bugs = [json.loads(line) for line in
            (tmp_path / "bugs" / "tasks.jsonl").read_text().splitlines()]
    assert bugs and all(b["kind"] == "synthetic" and b["FAIL_TO_PASS"] == ["TestWithin"]
                        for b in bugs)
    assert all(b["environment"]["runner"] == "gotest" for b in bugs)
