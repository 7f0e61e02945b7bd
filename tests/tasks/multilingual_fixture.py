"""A small repository laid out like google/gson (a Maven module ``gson/`` with JUnit 4 tests
and templated sources), and SWE-bench Multilingual instance records for it in the published
schema, made at test time (CI has no mirrors)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

GIT = ["git", "-c", "user.name=a", "-c", "user.email=a@b"]
PKG = "gson/src/main/java/com/google/gson"
TEST = "gson/src/test/java/com/google/gson/functional/PrimitiveTest.java"

POM = """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <parent><groupId>com.google.code.gson</groupId><artifactId>gson-parent</artifactId>
    <version>2.9.2-SNAPSHOT</version></parent>
  <artifactId>gson</artifactId>
  <dependencies>
    <dependency><groupId>junit</groupId><artifactId>junit</artifactId>
      <scope>test</scope></dependency>
  </dependencies>
</project>
"""
PARENT = """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>com.google.code.gson</groupId><artifactId>gson-parent</artifactId>
  <version>2.9.2-SNAPSHOT</version><packaging>pom</packaging>
  <modules><module>gson</module></modules>
</project>
"""
CODE = """package com.google.gson;

public final class Primitives {
  private Primitives() {}

  /** The JSON text of a number. */
  public static String toJson(Number n) {
    return %s;
  }
}
"""
BUGGY, FIXED = '"" + n.intValue()', "String.valueOf(n)"
TEMPLATE = """package com.google.gson.internal;

public final class GsonBuildConfig {
  public static final String VERSION = "${project.version}";
  private GsonBuildConfig() {}
}
"""
TESTS = """package com.google.gson.functional;

import static org.junit.Assert.assertEquals;

import com.google.gson.Primitives;
import com.google.gson.internal.GsonBuildConfig;
import org.junit.Test;

public class PrimitiveTest {
  @Test
  public void testIntSerialization() {
    assertEquals("42", Primitives.toJson(42));
  }

  @Test
  public void testVersion() {
    assertEquals("2.9.2-SNAPSHOT", GsonBuildConfig.VERSION);
  }
%s}
"""
NEW_TEST = """
  @Test
  public void testDoubleSerialization() {
    assertEquals("1.5", Primitives.toJson(1.5));
  }
"""


def git(root: Path, *args: str) -> str:
    return subprocess.run([*GIT, *args], cwd=root, capture_output=True, text=True,
                          check=True).stdout


def write(root: Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)


def make_gson_like(root: Path) -> dict[str, object]:
    """The repository at ``root`` and one instance record (version 2158: its spec names
    com.google.gson.functional.PrimitiveTest)."""
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    write(root, {"pom.xml": PARENT, "gson/pom.xml": POM, f"{PKG}/Primitives.java": CODE % BUGGY,
                 "gson/src/main/java-templates/com/google/gson/internal/GsonBuildConfig.java":
                 TEMPLATE, TEST: TESTS % ""})
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    base = git(root, "rev-parse", "HEAD").strip()
    write(root, {TEST: TESTS % NEW_TEST})
    test_patch = git(root, "diff")
    git(root, "checkout", "-q", "--", TEST)
    write(root, {f"{PKG}/Primitives.java": CODE % FIXED})
    patch = git(root, "diff")
    git(root, "checkout", "-q", "--", ".")
    cls = "com.google.gson.functional.PrimitiveTest"
    return {
        "repo": "google/gson", "instance_id": "google__gson-2158", "base_commit": base,
        "patch": patch, "test_patch": test_patch,
        "problem_statement": "Doubles are written as integers", "hints_text": "",
        "created_at": "2022-08-05T00:00:00Z", "version": "2158",
        "FAIL_TO_PASS": json.dumps([f"{cls}#testDoubleSerialization"]),
        "PASS_TO_PASS": json.dumps([f"{cls}#testIntSerialization", f"{cls}#testVersion"]),
    }
