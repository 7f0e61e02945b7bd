"""Detecting another language's build and test setup from a repository's own files."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from repogym.tasks.sources.common import is_test_path
from repogym.tasks.sources.detect import detect_environment
from repogym.tasks.sources.detect_langs import crate_packages, detect_language
from repogym.tasks.sources.tree_view import DirTree


def tree(root: Path, files: dict[str, str]) -> DirTree:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return DirTree(root)


def test_language_by_root_files() -> None:
    assert detect_language({"go.mod", "a.go"}) == "go"
    assert detect_language({"Cargo.toml", "src/lib.rs"}) == "rust"
    assert detect_language({"gson/pom.xml", "pom.xml"}) == "java"
    # gson's early history: the Maven module one level down, no build file at the root
    assert detect_language({"gson/pom.xml", "gson/src/main/java/A.java", "README"}) == "java"
    assert detect_language({"docs/pom.xml", "package.json"}) == "javascript"
    assert detect_language({"a/b/pom.xml"}) is None
    assert detect_language({"package.json", "index.js"}) == "javascript"
    assert detect_language({"package.json", "tsconfig.json"}) == "typescript"
    # a Python package with a package.json for its docs stays Python
    assert detect_language({"package.json", "pyproject.toml"}) is None


def test_test_paths_by_language_conventions() -> None:
    assert is_test_path("uuid_test.go") and is_test_path("gson/src/test/java/a/BTest.java")
    assert is_test_path("src/clamp.test.ts") and is_test_path("lib/x.spec.js")
    assert is_test_path("tests/uri.rs") and is_test_path("test/json.js")
    # cargo's benches: on the test side, as grading protects them (a gold patch never holds them)
    assert is_test_path("benches/bench.rs") and not is_test_path("benches/run.py")
    assert not is_test_path("src/lib.rs") and not is_test_path("lib/types/json.js")


def test_go_module_with_and_without_requirements(tmp_path: Path) -> None:
    env = detect_environment(tree(tmp_path / "a", {"go.mod": "module x\n\ngo 1.21\n"}))
    assert (env.language, env.runner) == ("go", "gotest")
    assert len(env.setup) == 1 and env.setup[0].startswith("go build ./...")
    env = detect_environment(tree(tmp_path / "b", {
        "go.mod": "module x\n\nrequire golang.org/x/text v0.3.0\n"}))
    assert env.setup[0] == "env -u GOPROXY go mod download"


def test_rust_crates_from_debian() -> None:
    manifest = {"dependencies": {"memchr": "2"},
                "dev-dependencies": {"criterion": {"version": "0.3.5",
                                                   "features": ["html_reports"]},
                                     "local": {"path": "../local"}},
                "target": {"cfg(unix)": {"dependencies": {"libc_print": "1"}}}}
    assert crate_packages(manifest) == ["librust-criterion-dev", "librust-libc-print-dev",
                                        "librust-memchr-dev"]


def test_rust_setup(tmp_path: Path) -> None:
    env = detect_environment(tree(tmp_path, {
        "Cargo.toml": '[package]\nname = "p"\n\n[dev-dependencies]\nrand = "0.8"\n'}))
    assert (env.language, env.runner) == ("rust", "cargo")
    assert "librust-rand-dev" in env.setup[0]
    assert 'replace-with = "debian"' in env.setup[1] and "/usr/share/cargo/registry" in env.setup[1]
    assert env.setup[-1].startswith("cargo test --offline --no-run")


def test_js_runner_lock_file_and_mocha_requires(tmp_path: Path) -> None:
    package = {"scripts": {"test": "mocha --require test/support/env --reporter spec test/"},
               "devDependencies": {"mocha": "10.2.0", "supertest": "6"}}
    env = detect_environment(tree(tmp_path / "m", {"package.json": json.dumps(package),
                                                   "package-lock.json": "{}"}))
    assert (env.language, env.runner) == ("javascript", "mocha")
    assert env.setup == ("npm ci --no-audit --no-fund --loglevel=error",)
    assert env.test_cmd == "node_modules/.bin/mocha --require test/support/env"
    env = detect_environment(tree(tmp_path / "v", {
        "package.json": json.dumps({"devDependencies": {"vitest": "1", "typescript": "5"}}),
        "src/a.ts": "export const a = 1;\n"}))
    assert (env.language, env.runner) == ("typescript", "vitest")
    assert env.setup[0].startswith("npm install")


def test_java_templates_get_the_pom_version(tmp_path: Path) -> None:
    pom = ('<project xmlns="http://maven.apache.org/POM/4.0.0"><parent><version>2.10</version>'
           '</parent><artifactId>g</artifactId><dependencies><dependency><version>4.13'
           '</version></dependency></dependencies></project>')
    env = detect_environment(tree(tmp_path, {
        "pom.xml": "<project/>", "g/pom.xml": pom,
        "g/src/main/java-templates/x/Config.java": "class Config { String v = "
                                                   "\"${project.version}\"; }\n"}))
    assert (env.language, env.runner) == ("java", "junit")
    assert env.setup[0].startswith("(cd g/src/main/java-templates") and "/2.10/g" in env.setup[0]
