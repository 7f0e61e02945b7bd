"""How a repository in a language other than Python is built and tested, read from its own
files at the commit: ``go.mod``, ``Cargo.toml``, ``package.json``, ``pom.xml`` or
``build.gradle``. The setup commands run once, as root, when the task's image is built
(``repogym.images.repository``), on the language's toolchain image (``repogym.images.toolchains``);
what they write beside the code (lock files, generated sources) never enters an agent's diff.

- go: modules from the module proxy when ``go.mod`` requires any (``go mod download``), then
  every package and test binary built once so the build cache is warm.
- rust: crates from Debian's ``librust-*-dev`` packages, used as cargo's registry (a
  directory source), for the dependencies and dev-dependencies ``Cargo.toml`` names; then
  ``cargo test --no-run``. The versions are Debian 12's: a requirement they do not meet fails
  the setup, and the candidate is dropped with that reason.
- javascript/typescript: ``npm ci`` with a lock file, else ``npm install``; the runner is the
  one in ``devDependencies`` (jest, vitest or mocha), Mocha with the ``--require`` options of
  the package's test script.
- java: a Maven or Gradle build at the root, or in one folder one level down when the root has
  none (``gson/pom.xml`` in gson's early history: the module is built alone). The JUnit runner
  compiles with ``javac`` (no Maven run, so no plugin reaches the network); sources that
  Maven's templating plugin makes from ``src/main/java-templates`` are made the same way
  (``${project.version}`` filled in).
"""

from __future__ import annotations

import json
import re
import shlex
import xml.etree.ElementTree as ET
from pathlib import PurePosixPath
from typing import Any

from repogym.schema import Environment

from .tree_view import TreeView, load_toml

JAVA_BUILDS = ("pom.xml", "build.gradle", "build.gradle.kts")
JS_RUNNERS = ("jest", "vitest", "mocha")  # in the order a package naming several is read
NPM = "--no-audit --no-fund --loglevel=error"
CARGO_CONFIG = "/opt/cargo/config.toml"
DEBIAN_REGISTRY = "/usr/share/cargo/registry"


def detect_language(files: set[str]) -> str | None:
    """The language of a tree by the files at its root, or None for Python (or unknown)."""
    if {"setup.py", "pyproject.toml", "setup.cfg"} & files:
        return None
    if "go.mod" in files or any(f.endswith(".go") and "/" not in f for f in files):
        return "go"
    if "Cargo.toml" in files:
        return "rust"
    if set(JAVA_BUILDS) & files:
        return "java"
    if "package.json" in files:
        typed = "tsconfig.json" in files or any(f.endswith(".ts") and not f.endswith(".d.ts")
                                                for f in files if "node_modules/" not in f)
        return "typescript" if typed else "javascript"
    if any(f.count("/") == 1 and f.rpartition("/")[2] in JAVA_BUILDS for f in files):
        return "java"  # a module one level down (the root has no build file of any kind)
    return None


def unbuildable(files: set[str], language: str | None) -> str | None:
    """Why a tree in ``language`` cannot be built offline, or None. Go code from before
    modules (no ``go.mod``) imports by GOPATH: its dependencies have no versions to fetch at
    image build time, so such a commit is no candidate."""
    if language == "go" and "go.mod" not in files:
        return ("pre-module Go: no go.mod at the base commit, so its imports have no versions "
                "to fetch (mine commits from after go.mod was added)")
    return None


def language_environment(tree: TreeView, language: str) -> Environment:
    files = set(tree.files())
    if language == "go":
        return go_environment(tree)
    if language == "rust":
        return rust_environment(tree)
    if language == "java":
        return java_environment(tree, files)
    return js_environment(tree, files, language)


# ---------------------------------------------------------------------------- go


def go_environment(tree: TreeView) -> Environment:
    mod = tree.read_text("go.mod") or ""
    setup = []
    if not mod:  # from before modules: a go.mod of the image's, named as the code says
        setup.append(f"go mod init {shlex.quote(_import_path(tree))}")
    if re.search(r"^\s*require\b", mod, re.M):
        # the toolchain image turns the proxy off for episodes; its default is used here
        setup.append("env -u GOPROXY go mod download")
    setup.append("go build ./... && { go test -count=1 -run '^$' ./... >/dev/null 2>&1 || "
                 "true; } && chmod -R a+rwX /opt/go/cache")
    return Environment(language="go", runner="gotest", setup=tuple(setup))


def _import_path(tree: TreeView) -> str:
    """The package's import comment (``package uuid // import "github.com/google/uuid"``),
    else a path named after the package."""
    package = "main"
    for path in sorted(f for f in tree.files() if f.endswith(".go") and "/" not in f):
        text = tree.read_text(path) or ""
        found = re.search(r'^package\s+(\w+)\s*//\s*import\s+"([^"]+)"', text, re.M)
        if found:
            return found.group(2)
        clause = re.search(r"^package\s+(\w+)", text, re.M)
        if clause and not path.endswith("_test.go"):
            package = clause.group(1)
    return f"example.com/{package}"


# ---------------------------------------------------------------------------- rust


def crate_packages(manifest: dict[str, Any]) -> list[str]:
    """Debian's package for each crate ``Cargo.toml`` depends on (dev-dependencies too)."""
    found: list[str] = []
    tables = [manifest.get(k, {}) for k in ("dependencies", "dev-dependencies")]
    for target in (manifest.get("target") or {}).values():
        if isinstance(target, dict):
            tables += [target.get(k, {}) for k in ("dependencies", "dev-dependencies")]
    for table in tables:
        for name, spec in (table or {}).items():
            if isinstance(spec, dict):
                if "path" in spec or "git" in spec:
                    continue
                name = str(spec.get("package", name))
            # Debian's package carries every feature's dependencies
            found.append(f"librust-{name.replace('_', '-').lower()}-dev")
    return sorted(set(found))


def rust_environment(tree: TreeView) -> Environment:
    manifest = load_toml(tree.read_text("Cargo.toml") or "")
    packages = crate_packages(manifest)
    setup = []
    if packages:
        setup.append(
            "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "
            f"--no-install-recommends {' '.join(packages)} >/tmp/crates.log 2>&1 "
            "|| { tail -20 /tmp/crates.log; exit 1; }; rm -rf /var/lib/apt/lists/*")
        setup.append(
            f"printf '[source.crates-io]\\nreplace-with = \"debian\"\\n\\n[source.debian]\\n"
            f"directory = \"{DEBIAN_REGISTRY}\"\\n' > {CARGO_CONFIG}")
    setup.append("cargo test --offline --no-run && chmod -R a+rwX target")
    return Environment(language="rust", runner="cargo", setup=tuple(setup))


# ---------------------------------------------------------------------------- javascript


def js_environment(tree: TreeView, files: set[str], language: str) -> Environment:
    try:
        package = json.loads(tree.read_text("package.json") or "{}")
    except ValueError:
        package = {}
    if not isinstance(package, dict):
        package = {}
    deps = {**(package.get("dependencies") or {}), **(package.get("devDependencies") or {})}
    script = str((package.get("scripts") or {}).get("test", ""))
    runner = next((r for r in JS_RUNNERS if r in deps), None) or next(
        (r for r in JS_RUNNERS if re.search(rf"\b{r}\b", script)), "jest")
    install = f"npm ci {NPM}" if "package-lock.json" in files else f"npm install {NPM}"
    test_cmd = ""
    if runner == "mocha":
        test_cmd = "node_modules/.bin/mocha" + "".join(
            f" --require {shlex.quote(r)}" for r in _mocha_requires(script))
    env = Environment(language=language, runner=runner, setup=(install,))
    return Environment(**{**env.__dict__, "test_cmd": test_cmd}) if test_cmd else env


def _mocha_requires(script: str) -> list[str]:
    try:
        words = shlex.split(script)
    except ValueError:
        return []
    return [b for a, b in zip(words, words[1:], strict=False) if a in ("--require", "-r")]


# ---------------------------------------------------------------------------- java


def java_environment(tree: TreeView, files: set[str]) -> Environment:
    setup = [f"{_template_command(tree, t)}" for t in sorted(
        {f.split("src/main/java-templates/")[0] for f in files
         if "src/main/java-templates/" in f})]
    return Environment(language="java", runner="junit", setup=tuple(setup) or ("true",))


def _template_command(tree: TreeView, module: str) -> str:
    """Copies ``<module>src/main/java-templates`` into ``src/main/java`` with
    ``${project.version}`` filled in from the module's pom (its own version or its parent's)."""
    version = _pom_version(tree.read_text(f"{module}pom.xml") or "") or "0"
    src = shlex.quote(str(PurePosixPath(module or ".") / "src/main/java-templates"))
    dst = shlex.quote(str(PurePosixPath(module or ".") / "src/main/java"))
    return (f"(cd {src} && find . -type f -name '*.java' | while read -r f; do "
            f"mkdir -p \"../java/$(dirname \"$f\")\" && "
            f"sed 's/\\${{project.version}}/{version}/g' \"$f\" > \"../java/$f\"; done) && "
            f"test -d {dst}")


def _pom_version(text: str) -> str | None:
    try:
        root = ET.fromstring(text)
    except ET.ParseError:
        return None
    ns = root.tag.partition("}")[0] + "}" if root.tag.startswith("{") else ""
    for path in (f"{ns}version", f"{ns}parent/{ns}version"):
        found = root.find(path)
        if found is not None and found.text and re.fullmatch(r"[\w.+-]+", found.text.strip()):
            return found.text.strip()
    return None
