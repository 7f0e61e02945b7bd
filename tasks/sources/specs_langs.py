"""SWE-bench Multilingual's environments: swebench 4.1's specs for its JavaScript, Go, Rust and
Java repositories (``language_specs`` of ``tasks/data/swebench4_specs.json``), translated into
repogym's language environments (``repogym.images.toolchains``, ``envs/grading/runners``).

A spec gives ``docker_specs`` (the toolchain version: ``node_version``, ``go_version``,
``rust_version``, ``java_version``), ``apt-pkgs``, ``pre_install``, ``install``, ``build`` and
``test_cmd`` (one command, or one per test for Maven, whose log parser reads ``BUILD SUCCESS``
after each ``-Dtest=``). The translation keeps what the harness means and runs it the way
repogym grades:

- the toolchain image of the language (Node 18, Go 1.23, rustc 1.63, JDK 17, all Debian's): a
  spec asking for an older one is built with ours and says so in ``environment_source``; one
  asking for a newer one is refused (its code may use what ours lacks);
- ``apt-pkgs``, ``pre_install``, ``install`` and ``build`` as setup commands, at image build
  time; the dependencies they fetch must come from a registry the build reaches
  (``REPOGYM_REGISTRIES``: by default Debian's packages, the Python package index and npm). Go
  modules, crates and Maven jars from registries the machine does not reach are refused per
  instance; a setup step that reaches a registry anyway gives up after a time limit and says
  which registry it could not reach;
- the test command becomes the runner that reads the same results (``go test`` -> ``gotest``,
  ``cargo test`` -> ``cargo``, Jest/Vitest/Mocha -> theirs, Maven -> ``junit``), with the test
  lists' names unchanged (``go test``'s and libtest's names, Maven's ``Class#method``). The
  spec's own log parser is recorded; the runner's machine-readable results and its parser
  (``gotest``, ``cargo``, ``jest``/``vitest``/``tap``, ``ant``) are the two sources grading
  cross-checks. Filters that would keep the canary tests from running (``-run``, ``-t``,
  ``-g``, a libtest filter) are dropped: more tests run, only the listed ones count.

Maven is never run: its plugins come from Maven Central. A Maven module is compiled with
``javac`` against Debian's jars (``DEBIAN_JARS``: the Maven coordinates Debian packages), the
class path written to ``/opt/repogym/java-classpath``; a dependency Debian does not package is
refused. Gradle (its wrapper downloads Gradle), Ant with Ivy, and browsers (Karma, xvfb) are
refused.
"""

from __future__ import annotations

import re
import shlex
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from repogym import settings
from repogym.envs.grading.protect_langs import JS_TEST_FILES
from repogym.images.runner_files import JUNIT_PLATFORM

from . import specs
from .common import run_git
from .detect_langs import _template_command, crate_packages
from .specs import SpecError, Translated
from .tree_view import load_toml

# the toolchains of repogym's images (images/toolchains.py), as Debian 12 ships them
HAVE = {"javascript": (18,), "go": (1, 23), "rust": (1, 63), "java": (17,)}
HAVE_TEXT = "Node 18, Go 1.23, rustc 1.63 and JDK 17 (Debian's)"
NAMES = {"javascript": "Node", "go": "Go", "rust": "rustc", "java": "JDK"}
VERSION_KEY = {"javascript": "node_version", "go": "go_version", "rust": "rust_version",
               "java": "java_version"}
SPEC_KEYS = {"docker_specs", "apt-pkgs", "pre_install", "install", "build", "test_cmd"}
DOCKER_KEYS = {*VERSION_KEY.values(), "pnpm_version", "_variant"}
REGISTRY_NAMES = {"debian": "Debian's packages", "pypi": "the Python package index",
                  "npm": "the npm registry", "go": "the Go module proxy",
                  "crates": "the crates registry", "maven": "Maven Central"}
STEP_LIMIT = 900  # seconds a setup step that needs a registry may take

# Maven coordinates -> the Debian package with that jar (under /usr/share/maven-repo)
DEBIAN_JARS = {
    "junit:junit": "junit4",
    "org.hamcrest:hamcrest-core": "libhamcrest-java",
    "org.hamcrest:hamcrest": "libhamcrest-java",
    "org.junit.jupiter:junit-jupiter": "junit5",
    "org.junit.jupiter:junit-jupiter-api": "junit5",
    "org.junit.jupiter:junit-jupiter-params": "junit5",
    "com.google.truth:truth": "libtruth-java",
    "com.google.guava:guava": "libguava-java",
    "com.google.guava:guava-testlib": "libguava-testlib-java",
    "com.google.errorprone:error_prone_annotations": "liberror-prone-java",
    "com.google.code.findbugs:jsr305": "libjsr305-java",
    "org.apache.commons:commons-lang3": "libcommons-lang3-java",
    "commons-io:commons-io": "libcommons-io-java",
    "org.mockito:mockito-core": "libmockito-java",
    "org.assertj:assertj-core": "libassertj-core-java",
}
CLASSPATH = "/opt/repogym/java-classpath"


def reachable() -> set[str]:
    """The registries image builds reach here (``REPOGYM_REGISTRIES``)."""
    words = re.split(r"[\s,]+", settings.REGISTRIES.get().strip())
    unknown = {w for w in words if w} - set(REGISTRY_NAMES)
    if unknown:
        raise SpecError(f"REPOGYM_REGISTRIES names {sorted(unknown)}; valid: "
                        f"{sorted(REGISTRY_NAMES)}")
    return {w for w in words if w}


def _unreachable(registry: str, what: str) -> SpecError:
    reached = ", ".join(REGISTRY_NAMES[r] for r in sorted(reachable())) or "none"
    return SpecError(f"{what} from {REGISTRY_NAMES[registry]}, which this machine does not "
                     f"reach (image builds reach: {reached}); where it is reached, add "
                     f"{registry} to REPOGYM_REGISTRIES")


def language_spec(repo: str, version: str) -> dict[str, Any] | None:
    """swebench 4.1's spec for a Multilingual repository and version, or None."""
    return specs.published().get("language_specs", {}).get(repo, {}).get(version)


def language_of(repo: str) -> str | None:
    return specs.published().get("language_of", {}).get(repo)


def harness_parser(repo: str) -> str | None:
    """swebench's log parser for a Multilingual repository, by name (``parse_log_maven``)."""
    return specs.published().get("language_parsers", {}).get(repo)


def unknown_version_reason(repo: str, version: str) -> str:
    return specs.unknown_spec_reason(repo, version)


def precheck(repo: str, version: str) -> None:
    """Raises SpecError when the instance cannot be built here whatever its repository holds
    (a toolchain, runner or build tool repogym lacks), before a clone is made for it."""
    spec = language_spec(repo, version)
    if spec is None:
        raise SpecError(unknown_version_reason(repo, version))
    translate(spec, repo, version, "", None, "HEAD")


def translate(spec: dict[str, Any], repo: str, version: str, test_patch: str,
              mirror: Path | None, commit: str) -> Translated:
    """A Multilingual spec as a repogym environment (see the module docstring)."""
    unknown = set(spec) - SPEC_KEYS
    docker = dict(spec.get("docker_specs") or {})
    if "run_args" in docker:
        raise SpecError(f"the spec runs its container with {docker['run_args']} (a browser's "
                        "needs); repogym's test containers get no extra rights")
    unknown |= {f"docker_specs.{k}" for k in set(docker) - DOCKER_KEYS}
    if unknown:
        raise SpecError(f"spec keys repogym does not know: {sorted(unknown)}")
    language = language_of(repo)
    if language not in HAVE:
        raise SpecError(f"{repo} is not one of swebench's JavaScript, Go, Rust or Java "
                        "repositories")
    notes = [*_toolchain(language, docker.get(VERSION_KEY[language]))]
    commands = spec.get("test_cmd") or []
    commands = [commands] if isinstance(commands, str) else [str(c) for c in commands]
    if not commands:
        raise SpecError("the spec has no test command")
    tree = _Tree(mirror, commit)
    setup = _apt(spec.get("apt-pkgs") or [])
    setup += [str(c) for c in spec.get("pre_install") or []]
    steps = [str(c) for c in [*(spec.get("install") or []), *(spec.get("build") or [])]]
    if language == "javascript":
        env = _javascript(commands, steps, docker, tree, notes)
    elif language == "go":
        env = _go(commands, steps, tree, notes)
    elif language == "rust":
        env = _rust(commands, steps, tree, notes)
    else:
        env = _java(commands, steps, test_patch, tree, notes)
    env["setup"] = setup + list(env.get("setup", []))
    if language != "java":
        env["test_files"] = test_files(test_patch, language)
    provenance: dict[str, Any] = {"harness_log_parser": harness_parser(repo),
                                  "harness_test_cmd": commands if len(commands) < 6 else
                                  [*commands[:5], f"... {len(commands) - 5} more"]}
    if notes:
        provenance["notes"] = notes
    return Translated(env, provenance)


class _Tree:
    """The repository at the instance's commit, when a mirror is there to read."""

    def __init__(self, mirror: Path | None, commit: str) -> None:
        self.mirror, self.commit = mirror, commit

    def read(self, path: str) -> str | None:
        if self.mirror is None:
            return None
        kind = run_git(self.mirror, "cat-file", "-t", f"{self.commit}:{path}",
                       check=False).strip()
        return run_git(self.mirror, "show", f"{self.commit}:{path}") if kind == "blob" else None

    def exists(self, path: str) -> bool:
        return self.read(path) is not None


def _version(text: str) -> tuple[int, ...]:
    found = re.match(r"\d+(\.\d+)*", text.strip())
    if not found:
        raise SpecError(f"toolchain version {text!r} is not a version like 1.23")
    return tuple(int(x) for x in found.group(0).split("."))


def _toolchain(language: str, wanted: Any) -> list[str]:
    """Notes on the toolchain version, or SpecError when the spec needs a newer one."""
    if wanted is None:
        return []
    have = HAVE[language]
    asked = _version(str(wanted))[: len(have)]
    name = NAMES[language]
    have_text = ".".join(map(str, have))
    if asked > have:
        raise SpecError(f"the spec asks for {name} {wanted}; repogym's {language} image has "
                        f"{name} {have_text}, and none newer (the images here: {HAVE_TEXT})")
    if asked < have:
        return [f"{name} {wanted} asked for; built and run with {name} {have_text}"]
    return []


def _apt(packages: list[str]) -> list[str]:
    if not packages:
        return []
    names = " ".join(shlex.quote(str(p)) for p in packages)
    return ["apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "
            f"--no-install-recommends {names} >/tmp/apt.log 2>&1 || "
            "{ tail -20 /tmp/apt.log; exit 1; }; rm -rf /var/lib/apt/lists/*"]


def _guarded(command: str, registry: str) -> str:
    """``command`` with a time limit and, when it fails, the registry it needed named."""
    return (f"timeout {STEP_LIMIT} bash -c {shlex.quote(command)} || {{ rc=$?; echo "
            f"{shlex.quote(f'repogym: this step needs {REGISTRY_NAMES[registry]}')}"
            f"\" and failed (exit $rc; 124: no answer in {STEP_LIMIT}s)\"; exit 1; }}")


def _env_prefix(words: list[str]) -> tuple[list[str], list[str]]:
    """(``VAR=value`` words a command starts with, the rest)."""
    i = 0
    while i < len(words) and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[i]):
        i += 1
    return words[:i], words[i:]


def _split(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError as err:
        raise SpecError(f"cannot read the test command {command!r}: {err}") from err


# ---------------------------------------------------------------------------- go


def _go(commands: list[str], steps: list[str], tree: _Tree,
        notes: list[str]) -> dict[str, Any]:
    prefix: list[str] = []
    for command in commands:
        env_words, words = _env_prefix(_split(command))
        if words[:2] != ["go", "test"]:
            raise SpecError(f"the test command {command!r} is not `go test`; repogym's Go "
                            "runner runs go test")
        prefix = env_words
        if "-run" in words or any(w.startswith("-run=") for w in words):
            notes.append("go test's -run filter dropped: the canary tests must run too")
    mod = tree.read("go.mod")
    setup = []
    if mod is not None and re.search(r"^\s*require\b", mod, re.M):
        if "go" not in reachable():
            raise _unreachable("go", "go.mod requires modules, which come")
        setup.append(_guarded("env -u GOPROXY go mod download", "go"))
    for step in steps:  # the harness's `go test -c PKG` builds a binary beside the code
        words = _split(step)
        if words[:3] == ["go", "test", "-c"]:
            step = shlex.join(["go", "test", "-count=1", "-run", "^$", *[
                w for w in _drop_run(words[3:])]])
        # the image's GOPROXY is off: only `go mod` steps may reach the proxy (`go mod tidy`)
        fetches = words[:2] == ["go", "mod"] and mod is not None and "go" in reachable()
        setup.append(_guarded(f"env -u GOPROXY {step}", "go") if fetches else step)
    setup.append("chmod -R a+rwX /opt/go/cache")
    test_cmd = shlex.join([*prefix, "go", "test"])
    return {"language": "go", "runner": "gotest", "log_parser": "gotest", "setup": setup,
            "test_cmd": test_cmd}


def test_files(test_patch: str, language: str) -> list[str]:
    """The test patch's files the runner is given: Go's ``*_test.go`` (their packages run),
    JavaScript's test files (not fixtures or helpers, which a runner given them by path would
    fail on), Rust's ``.rs`` files; Java's come from the Maven command (``_java``)."""
    import fnmatch

    paths = re.findall(r"^diff --git a/.* b/(.*)$", test_patch, re.M)
    if language == "go":
        return [p for p in paths if p.endswith("_test.go")]
    if language == "rust":
        return [p for p in paths if p.endswith(".rs")]
    js = (".js", ".ts", ".mjs", ".cjs", ".jsx", ".tsx")
    out = []
    for path in paths:
        parts, name = path.split("/")[:-1], path.rsplit("/", 1)[-1]
        if not name.endswith(js) or {"fixtures", "__fixtures__", "helpers", "__mocks__"} & set(
                parts):
            continue
        if any(fnmatch.fnmatch(name, p) for p in JS_TEST_FILES) or {
                "test", "tests", "__tests__"} & set(parts):
            out.append(path)
    return out


def _drop_run(words: list[str]) -> list[str]:
    out, skip = [], False
    for word in words:
        if skip:
            skip = False
        elif word == "-run":
            skip = True
        elif not word.startswith("-run="):
            out.append(word)
    return out


# ---------------------------------------------------------------------------- rust


def _rust(commands: list[str], steps: list[str], tree: _Tree,
          notes: list[str]) -> dict[str, Any]:
    test_cmd = ""
    for command in commands:
        env_words, words = _env_prefix(_split(command))
        if words[:2] != ["cargo", "test"]:
            raise SpecError(f"the test command {command!r} is not `cargo test`")
        keep: list[str] = []
        rest = words[2:]
        while rest:  # the package and features say what is built; targets and filters go
            word = rest.pop(0)
            if word == "--":
                break
            if word in ("--package", "-p", "--features", "-F") and rest:
                keep += [word, rest.pop(0)]
            elif word in ("--all-features", "--workspace"):
                keep.append(word)
            elif word in ("--test", "--bench", "--example", "--bin") and rest:
                rest.pop(0)
        test_cmd = shlex.join([*env_words, "cargo", "test", *keep])
    notes.append("cargo test's target and name filters dropped: the runner builds --lib --bins "
                 "--tests and the canary tests must run too")
    manifest = load_toml(tree.read("Cargo.toml") or "")
    setup: list[str] = []
    crates = crate_packages(manifest)
    if crates and "crates" not in reachable():
        raise _unreachable("crates", f"Cargo.toml depends on {len(crates)} crates, which come")
    setup += [_guarded(step, "crates") for step in steps]
    setup.append("chmod -R a+rwX target 2>/dev/null || true")
    return {"language": "rust", "runner": "cargo", "log_parser": "cargo", "setup": setup,
            "test_cmd": test_cmd}


# ---------------------------------------------------------------------------- javascript

JS_REFUSED = {"karma": "Karma (in a browser)", "qunit": "QUnit", "jasmine": "Jasmine",
              "grunt": "Grunt", "gulp": "gulp", "xvfb-run": "a browser under xvfb"}


def _javascript(commands: list[str], steps: list[str], docker: dict[str, Any], tree: _Tree,
                notes: list[str]) -> dict[str, Any]:
    command = commands[-1]  # Chart.js's repeat the install first; those are refused below
    env_words, words = _env_prefix(_split(command))
    text = " ".join(words)
    for word, what in JS_REFUSED.items():
        if re.search(rf"\b{re.escape(word)}\b", text):
            raise SpecError(f"the spec runs its tests with {what}; repogym has runners for "
                            "Jest, Vitest and Mocha")
    runner = next((r for r in ("jest", "vitest", "mocha") if re.search(rf"\b{r}\b", text)),
                  None)
    script = re.search(r"\b(?:yarn|npm|pnpm)(?: run)? ([\w:-]+)", text)
    if runner is None and script:
        runner = _script_runner(tree, script.group(1))
    if runner is None:
        raise SpecError(f"the test command {command!r} runs no runner repogym has (Jest, "
                        "Vitest, Mocha)")
    if len(commands) > 1:
        raise SpecError(f"the spec runs {len(commands)} commands to test; repogym grades one")
    if re.search(r"(^|\s)(-t|-g|--grep|--testNamePattern)\b", text):
        notes.append(f"{runner}'s name filter dropped: the canary tests must run too")
    setup = []
    managers = " ".join(f"{m}@{docker[m + '_version']}" if docker.get(f"{m}_version") else m
                        for m in ("yarn", "pnpm")
                        if any(re.search(rf"\b{m}\b", s) for s in [*steps, command]))
    if managers:  # the harness's images have them; ours get them from the npm registry
        setup.append(_guarded(f"npm install -g --no-audit --no-fund {managers}", "npm"))
    setup += [_guarded(step, "npm") for step in steps]
    built = [s for s in steps if re.search(r"\b(build|bootstrap)\b", s)]
    if built:
        notes.append(f"build steps run at image build only: {built}")
    default = {"jest": "node_modules/.bin/jest", "vitest": "node_modules/.bin/vitest run",
               "mocha": "node_modules/.bin/mocha"}[runner]
    return {"language": "typescript" if tree.exists("tsconfig.json") else "javascript",
            "runner": runner, "log_parser": {"mocha": "tap"}.get(runner, runner),
            "setup": setup, "test_cmd": shlex.join(env_words) + (" " if env_words else "")
            + default}


def _script_runner(tree: _Tree, name: str) -> str | None:
    """The runner ``package.json``'s script ``name`` runs."""
    import json

    try:
        package = json.loads(tree.read("package.json") or "{}")
    except ValueError:
        return None
    script = str((package.get("scripts") or {}).get(name, "")) if isinstance(
        package, dict) else ""
    return next((r for r in ("jest", "vitest", "mocha") if re.search(rf"\b{r}\b", script)),
                None)


# ---------------------------------------------------------------------------- java

_TEST = re.compile(r"-Dtest=(\S+)")
_MODULE = re.compile(r"(?:^|\s)(?:-pl|--projects)\s+(\S+)")


def _java(commands: list[str], steps: list[str], test_patch: str, tree: _Tree,
          notes: list[str]) -> dict[str, Any]:
    first = _split(commands[0])
    tool = first[0] if first else ""
    if tool.endswith("gradlew") or tool == "gradle":
        raise SpecError("the spec builds with Gradle, whose wrapper downloads Gradle and the "
                        "build's plugins from registries this machine does not reach")
    if tool == "ant":
        raise SpecError("the spec builds with Ant, whose build fetches its jars with Ivy "
                        "from registries this machine does not reach")
    if tool not in ("mvn", "mvnd", "./mvnw"):
        raise SpecError(f"the test command {commands[0]!r} is not Maven, Gradle or Ant")
    modules = {m for c in commands for m in _MODULE.findall(c)}
    if len(modules) > 1 or any("," in m for m in modules):
        raise SpecError(f"the tests run in several Maven modules {sorted(modules)}; repogym's "
                        "JUnit runner compiles one")
    module = next(iter(modules), "")
    classes = sorted({t.split("#")[0] for c in commands for t in _TEST.findall(c)})
    files = [f"{module + '/' if module else ''}src/test/java/{c.replace('.', '/')}.java"
             for c in classes if "*" not in c]
    if not files:
        raise SpecError("the Maven command names no test class (-Dtest=)")
    notes.append("Maven is not run (its plugins come from Maven Central): the module is "
                 "compiled with javac against Debian's jars and run with the JUnit console "
                 "launcher")
    packages = _debian_packages(tree, module)
    setup = [_classpath(packages)] if packages else []
    root = f"{module}/" if module else ""
    if tree.mirror is not None and _has_templates(tree, root):
        setup.append(_template_command(_TreeView(tree), root))
    # the module and its tests compile once here (as the runner compiles them), so a build
    # that cannot work fails with its reason rather than as tests that did not run
    setup.append(_compile_check(root))
    return {"language": "java", "runner": "junit", "log_parser": "ant", "setup": setup,
            "test_files": sorted(set(files) | set(_patch_tests(test_patch, root)))}


def _has_templates(tree: _Tree, root: str) -> bool:
    assert tree.mirror is not None
    out = run_git(tree.mirror, "ls-tree", "--name-only", tree.commit,
                  f"{root}src/main/java-templates", check=False)
    return bool(out.strip())


class _TreeView:
    """``_Tree`` as ``detect.TreeView`` (for the template command)."""

    def __init__(self, tree: _Tree) -> None:
        self.tree = tree

    def files(self) -> list[str]:
        assert self.tree.mirror is not None
        out = run_git(self.tree.mirror, "ls-tree", "-r", "-z", "--name-only", self.tree.commit)
        return sorted(p for p in out.split("\0") if p)

    def read_text(self, path: str) -> str | None:
        return self.tree.read(path)


def _patch_tests(test_patch: str, root: str) -> list[str]:
    paths = re.findall(r"^diff --git a/.* b/(.*)$", test_patch, re.M)
    return [p for p in paths if p.startswith(f"{root}src/test/java/") and p.endswith(".java")]


def _dependencies(tree: _Tree, module: str) -> list[tuple[str, str, str]]:
    """(groupId, artifactId, scope) of the module's pom and its parent folder's pom."""
    found = []
    for path in dict.fromkeys([f"{module}/pom.xml" if module else "pom.xml", "pom.xml"]):
        text = tree.read(path)
        if not text:
            continue
        try:
            root = ET.fromstring(text)
        except ET.ParseError as err:
            raise SpecError(f"{path} is not XML: {err}") from err
        ns = root.tag.partition("}")[0] + "}" if root.tag.startswith("{") else ""
        for dep in root.findall(f"{ns}dependencies/{ns}dependency"):
            group = (dep.findtext(f"{ns}groupId") or "").strip()
            artifact = (dep.findtext(f"{ns}artifactId") or "").strip()
            scope = (dep.findtext(f"{ns}scope") or "compile").strip()
            if group and artifact and scope not in ("import", "system"):
                found.append((group, artifact, scope))
    return found


def _debian_packages(tree: _Tree, module: str) -> set[str]:
    if tree.mirror is None:
        return set()
    missing = [f"{g}:{a}" for g, a, _ in _dependencies(tree, module)
               if f"{g}:{a}" not in DEBIAN_JARS]
    if missing:
        raise _unreachable("maven", f"the module needs {', '.join(sorted(set(missing)))}, "
                           "which Debian does not package here (repogym's table of Debian's "
                           "jars: tasks/sources/specs_langs.py) and which come")
    return {DEBIAN_JARS[f"{g}:{a}"] for g, a, _ in _dependencies(tree, module)}



def _classpath(packages: set[str]) -> str:
    """Installs Debian's packages and writes the class path: the jars of those packages and of
    the Java packages they depend on (Debian's jars name no class path of their own)."""
    names = " ".join(sorted(packages))
    return ("apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "
            f"--no-install-recommends {names} >/tmp/apt.log 2>&1 || "
            "{ tail -20 /tmp/apt.log; exit 1; }; mkdir -p /opt/repogym && "
            "for p in $(apt-cache depends --recurse --installed --no-recommends --no-suggests "
            "--no-conflicts --no-breaks --no-replaces --no-enhances "
            f"{names} | grep -E '^[a-z0-9][a-z0-9.+-]+$' | sort -u); do dpkg -L \"$p\" | "
            "grep -E '^/usr/share/java/[^/]+\\.jar$' || true; done | sort -u > "
            f"{CLASSPATH} && rm -rf /var/lib/apt/lists/* /tmp/apt.log && test -s {CLASSPATH}")


def _compile_check(root: str) -> str:
    main, test = shlex.quote(root + "src/main/java"), shlex.quote(root + "src/test/java")
    javac = "javac -nowarn -encoding UTF-8 -d"
    said = "head -c 3000 $w/log; echo; echo 'repogym: the module"
    return (f"w=$(mktemp -d) && mkdir -p $w/main $w/test && "
            f"cp=\"$(tr '\\n' : < {CLASSPATH} 2>/dev/null)\" && "
            f"find {main} -name '*.java' ! -name module-info.java > $w/main.txt && "
            f"{{ {javac} $w/main -cp \"$cp\" @$w/main.txt > $w/log 2>&1 || {{ {said} does "
            f"not compile with javac against Debian'\\''s jars'; exit 1; }}; }} && "
            f"{{ [ ! -d {test} ] || {{ find {test} -name '*.java' > $w/test.txt && {javac} "
            f"$w/test -cp \"$w/main:{JUNIT_PLATFORM}:$cp\" @$w/test.txt > $w/log 2>&1; }} || "
            f"{{ {said}'\\''s tests do not compile against Debian'\\''s jars (an API newer "
            f"than the version Debian packages?)'; exit 1; }}; }} && rm -rf $w")
