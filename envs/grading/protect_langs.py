"""What an agent may not change in a JavaScript/TypeScript, Go, Rust or Java repository.

By each ecosystem's conventions: test files and folders, the runner's configuration, and what
decides how tests are built or reported (``go.mod`` replace directives, Cargo profiles and
build scripts, Maven/Gradle test configuration, JUnit's service files). Files that also hold
ordinary settings (``package.json``, ``go.mod``, ``Cargo.toml``, ``pom.xml``,
``build.gradle``) are judged by content: only a change to the parts that concern tests is
removed. Dependencies and build output (``node_modules/``, ``vendor/``, ``target/``) are
never the agent's to ship.
"""

from __future__ import annotations

import fnmatch
import json
import re
import tomllib

from repogym.envs.grading.flags import Protected

JS_TEST_DIRS = {"test", "tests", "__tests__", "spec", "__mocks__", "__snapshots__"}
JS_TEST_FILES = ("*.test.*", "*.spec.*", "*-test.js", "*_test.js", "*-spec.js")
JS_CONFIGS = ("jest.config.*", "vitest.config.*", "vitest.workspace.*", "vite.config.*",
              ".mocharc*", "jest.setup.*", "karma.conf.*", ".babelrc*", "babel.config.*",
              ".nycrc*", ".c8rc*")
RUST_CONFIGS = {"build.rs", "rust-toolchain", "rust-toolchain.toml", ".cargo"}
JAVA_CONFIGS = {"junit-platform.properties", "maven.config", "jvm.config",
                "gradle.properties", "settings.gradle", "settings.gradle.kts"}
CONTENT_CHECKED = {"package.json", "go.mod", "go.work", "Cargo.toml", "pom.xml",
                   "build.gradle", "build.gradle.kts"}
DEPENDENCY_DIRS = {"node_modules", "vendor", "target", ".gradle"}


def protected_reason(path: str, language: str) -> Protected | None:
    """Why ``path`` is off limits in a ``language`` repository, or None."""
    parts = path.split("/")
    name = parts[-1]
    if any(p in DEPENDENCY_DIRS for p in parts[:-1]):
        return "dependencies"
    check = {"javascript": _js, "typescript": _js, "go": _go, "rust": _rust, "java": _java}
    rule = check.get(language)
    return rule(parts, name) if rule else None


def _js(parts: list[str], name: str) -> Protected | None:
    if any(fnmatch.fnmatch(name, pattern) for pattern in JS_CONFIGS):
        return "runner_config"
    if any(p in JS_TEST_DIRS for p in parts[:-1]):
        return "test_path"
    if any(fnmatch.fnmatch(name, pattern) for pattern in JS_TEST_FILES):
        return "test_file"
    return None


def _go(parts: list[str], name: str) -> Protected | None:
    if name.endswith("_test.go"):
        return "test_file"
    if "testdata" in parts[:-1]:
        return "test_path"
    if name in ("go.work.sum",):
        return "runner_config"
    return None


def _rust(parts: list[str], name: str) -> Protected | None:
    if name in RUST_CONFIGS or ".cargo" in parts[:-1]:
        return "runner_config"
    if parts[0] in ("tests", "benches") and len(parts) > 1:
        return "test_path"
    if name in ("tests.rs", "test.rs") or "tests" in parts[1:-1]:
        return "test_file"
    return None


def _java(parts: list[str], name: str) -> Protected | None:
    path = "/".join(parts)
    if name in JAVA_CONFIGS or ".mvn" in parts[:-1]:
        return "runner_config"
    if "META-INF/services/org.junit" in path or "META-INF/services/org.testng" in path:
        return "runner_config"
    if "src/test/" in path or path.startswith("src/test") or "/src/it/" in path:
        return "test_path"
    if name.endswith(("Test.java", "Tests.java", "IT.java")) or (
            name.startswith("Test") and name.endswith(".java")):
        return "test_file"
    return None


# --- files judged by content -------------------------------------------------------------------


def content_checked(path: str, language: str) -> bool:
    return language != "python" and path.rsplit("/", 1)[-1] in CONTENT_CHECKED


def test_settings(path: str, text: str) -> str:
    """The part of a build file that concerns tests, normalised for comparison."""
    name = path.rsplit("/", 1)[-1]
    reader = {"package.json": _package_json, "go.mod": _go_mod, "go.work": _go_mod,
              "Cargo.toml": _cargo_toml, "pom.xml": _pom, "build.gradle": _gradle,
              "build.gradle.kts": _gradle}.get(name)
    return reader(text) if reader else ""


def config_changed(path: str, before: str, after: str) -> bool:
    return test_settings(path, before) != test_settings(path, after)


def _package_json(text: str) -> str:
    try:
        data = json.loads(text) if text.strip() else {}
    except ValueError:
        return "unparsable:" + text
    if not isinstance(data, dict):
        return "unparsable:" + text
    scripts = data.get("scripts") or {}
    kept = {k: v for k, v in scripts.items() if "test" in k} if isinstance(scripts, dict) else {}
    keys = ("jest", "mocha", "vitest", "c8", "nyc", "ava", "babel", "type", "imports")
    return json.dumps({"scripts": kept, **{k: data.get(k) for k in keys}}, sort_keys=True)


def _go_mod(text: str) -> str:
    # replace directives swap a module's code; go/toolchain lines change what builds
    kept = []
    block = False
    for line in text.splitlines():
        stripped = line.split("//", 1)[0].strip()
        if stripped.startswith("replace ("):
            block = True
            continue
        if block:
            if stripped == ")":
                block = False
            elif stripped:
                kept.append("replace " + stripped)
            continue
        if stripped.startswith(("replace ", "toolchain ", "go ", "use ")):
            kept.append(stripped)
    return "\n".join(kept)


def _cargo_toml(text: str) -> str:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return "unparsable:" + text
    package = data.get("package", {}) if isinstance(data.get("package"), dict) else {}
    keys = ("build", "autotests", "autobins", "autoexamples", "autobenches", "links")
    lib: dict[str, object] = data["lib"] if isinstance(data.get("lib"), dict) else {}
    return repr(sorted({
        "package": {k: package.get(k) for k in keys},
        "profile": data.get("profile"), "test": data.get("test"), "bench": data.get("bench"),
        "lib": {k: lib.get(k) for k in ("test", "harness", "doctest", "path", "proc-macro")},
        "bin": data.get("bin"), "patch": data.get("patch"), "replace": data.get("replace"),
        "workspace": data.get("workspace"), "dev-dependencies": data.get("dev-dependencies"),
        "target": data.get("target"),
    }.items(), key=str))


_POM_TEST = re.compile(
    r"<plugin>(?:(?!</plugin>).)*?(?:surefire|failsafe|junit)(?:(?!</plugin>).)*?</plugin>"
    r"|<(skipTests|maven\.test\.[\w.]+|testSourceDirectory|testFailureIgnore|skip|"
    r"testOutputDirectory|surefire\.[\w.]+)>.*?</\1>"
    r"|<dependency>(?:(?!</dependency>).)*?<scope>test</scope>(?:(?!</dependency>).)*?"
    r"</dependency>", re.S)


def _pom(text: str) -> str:
    return "\n".join(re.sub(r"\s+", " ", m.group(0)) for m in _POM_TEST.finditer(text))


def _gradle(text: str) -> str:
    return "\n".join(line.strip() for line in text.splitlines()
                     if re.search(r"(?i)test|junit|ignoreFailures|exclude", line))
