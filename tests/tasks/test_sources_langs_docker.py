"""`repogym tasks add git` and `synthetic` on small Go and Java projects made at test time:
their language and setup are detected, and the candidates are validated in Docker."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from repogym.images.recipe import USER
from repogym.sandbox.client import docker_client

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


CLAMP_JAVA = """package clamp;

public final class Clamp {
  public static int clamp(int x, int lo, int hi) {
    if (x < lo) return lo;
    if (x > hi) return hi;
    return x;
  }
}
"""
CLAMP_JAVA_TEST = """package clamp;

import static org.junit.Assert.assertEquals;

import org.junit.Test;

public class ClampTest {
  @Test
  public void inside() { assertEquals(5, Clamp.clamp(5, 0, 10)); }

  @Test
  public void below() { assertEquals(0, Clamp.clamp(-1, 0, 10)); }
}
"""
ABOVE_JAVA_TEST = """
  @Test
  public void above() { assertEquals(10, Clamp.clamp(11, 0, 10)); }
}
"""
POM = ('<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
       '<groupId>x</groupId><artifactId>clamp</artifactId><version>1.0</version></project>\n')


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


def java_module(root: Path) -> Path:
    """gson's early layout: the Maven module in ``lib/``, nothing to build at the root."""
    repo = root / "jclamp"
    lib = repo / "lib" / "src"
    (lib / "main/java/clamp").mkdir(parents=True)
    (lib / "test/java/clamp").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("clamp\n")
    (repo / "lib/pom.xml").write_text(POM)
    main, test = lib / "main/java/clamp/Clamp.java", lib / "test/java/clamp/ClampTest.java"
    main.write_text(CLAMP_JAVA.replace("    if (x > hi) return hi;\n", ""))
    test.write_text(CLAMP_JAVA_TEST)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "Clamp below")
    main.write_text(CLAMP_JAVA)
    test.write_text(CLAMP_JAVA_TEST.rstrip().removesuffix("}") + ABOVE_JAVA_TEST)
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
    tag = toolchain("go")
    # the standard library is in the image's build cache, usable by the tests' user
    stale = docker_client().containers.run(
        tag, ["go", "list", "-f", "{{if .Stale}}{{.ImportPath}}{{end}}", "std"], user=USER,
        remove=True).decode()
    assert stale.strip() == ""
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


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.toolchain("java")
def test_java_module_one_level_down_is_mined(toolchain: Callable[[str], str],
                                             tmp_path: Path) -> None:
    toolchain("java")
    report = add("git", str(java_module(tmp_path)), "--out", str(tmp_path / "mined"))
    assert report["kept"] == 1, report
    task = json.loads((tmp_path / "mined" / "tasks.jsonl").read_text().splitlines()[0])
    assert (task["environment"]["language"], task["environment"]["runner"]) == ("java", "junit")
    assert task["FAIL_TO_PASS"] == ["clamp.ClampTest#above"]
    assert sorted(task["PASS_TO_PASS"]) == ["clamp.ClampTest#below", "clamp.ClampTest#inside"]
