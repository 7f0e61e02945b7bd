"""Java: ``javac`` and the JUnit Platform console launcher, on the Maven layout
(``[module/]src/main/java``, ``src/test/java``, ``src/*/resources``).

The launcher writes JUnit XML reports (Surefire's format) to the grader's folder: the
machine-readable results. repogym's listener (``/opt/repogym/junit/repogym-listener.jar``)
prints ``[junit] [PASS] Class#method`` lines, read by swebench's ``parse_log_ant``. JUnit 4
tests run on the vintage engine, JUnit 5 on Jupiter. Test ids are ``Class#method``. Jars the
code needs come from ``/opt/repogym/java-classpath`` (a class path the task's setup writes,
e.g. Debian's ``/usr/share/java/*.jar``) and, after a Maven build at image time, from
``target/dependency``. The code is compiled on the class path: a ``module-info.java`` is left
out (its ``requires`` would need the jars on a module path)."""

from __future__ import annotations

import posixpath
import random
import re
import shlex
import xml.etree.ElementTree as ET

from repogym.images.runner_files import JUNIT_PLATFORM
from repogym.schema import Environment

from .language import OUT, Canary, Results, camel, merge, plain_exit, put, words

TEST_ROOT = "src/test/java/"
_NAME = re.compile(r"[(\[].*$")


def module_of(path: str) -> str:
    """``gson/src/test/java/x/YTest.java`` -> ``gson``."""
    head, sep, _ = path.partition(TEST_ROOT)
    return head.rstrip("/") if sep else ""


def class_of(path: str) -> str:
    return path.partition(TEST_ROOT)[2].removesuffix(".java").replace("/", ".")


class JUnit:
    name = "junit"
    log_parser = "ant"
    default_cmd = "java"

    def command(self, env: Environment, files: list[str]) -> str:
        java = [f for f in files if f.endswith(".java") and TEST_ROOT in f]
        modules = sorted({module_of(f) for f in java}) or [""]
        mod = modules[0]
        root = f"{mod}/" if mod else ""
        select = " ".join(f"--select-class {shlex.quote(class_of(f))}" for f in java
                          if module_of(f) == mod)
        return f"""set -u
w=$(mktemp -d /tmp/repogym-java.XXXXXX)
cp_deps=$(cat /opt/repogym/java-classpath 2>/dev/null | tr '\\n' ':')
for d in {root}target/dependency; do
  [ -d "$d" ] && cp_deps="$cp_deps$(find "$d" -name '*.jar' -printf '%p:')"
done
find {root}src/main/java -name '*.java' ! -name module-info.java > "$w/main.txt" 2>/dev/null
mkdir -p "$w/main" "$w/test"
if [ -s "$w/main.txt" ]; then
  javac -nowarn -encoding UTF-8 -d "$w/main" -cp "$cp_deps" @"$w/main.txt" 2>&1 \\
    || {{ echo "[repogym] javac failed (main)"; exit 2; }}
fi
find {root}src/test/java -name '*.java' > "$w/test.txt"
javac -nowarn -encoding UTF-8 -d "$w/test" -cp "$w/main:{JUNIT_PLATFORM}:$cp_deps" \\
  @"$w/test.txt" 2>&1 || {{ echo "[repogym] javac failed (test)"; exit 2; }}
res="$w/main:$w/test"
for d in {root}src/main/resources {root}src/test/resources; do [ -d "$d" ] && res="$res:$d"; done
java -cp "{JUNIT_PLATFORM}:/opt/repogym/junit/repogym-listener.jar" \\
  org.junit.platform.console.ConsoleLauncher --disable-banner --details=none \\
  --disable-ansi-colors --reports-dir={OUT}/junit --class-path "$res:$cp_deps" {select}
"""

    def parse(self, outputs: dict[str, str], log: str) -> dict[str, str]:
        statuses: dict[str, str] = Results()
        for name, text in outputs.items():
            if not (name.startswith("junit/") and name.endswith(".xml")):
                continue
            try:
                root = ET.fromstring(text)
            except ET.ParseError:
                statuses[f"<unparsable {name}>"] = "ERROR"
                continue
            for case in root.iter("testcase"):
                test_id = f"{case.get('classname', '')}#{_NAME.sub('', case.get('name', ''))}"
                tags = {child.tag for child in case}
                status = ("ERROR" if "error" in tags else "FAILED" if "failure" in tags
                          else "SKIPPED" if "skipped" in tags else "PASSED")
                merge(statuses, test_id, status)
        return statuses

    def log_key(self, test_id: str) -> str:
        return test_id

    def canary(self, test_files: list[str], rng: random.Random) -> Canary:
        first = next((f for f in test_files if TEST_ROOT in f), f"{TEST_ROOT}X.java")
        folder = posixpath.dirname(first)
        package = class_of(first).rpartition(".")[0]
        a, b = words(rng)
        cls = f"{camel([a, b])}Test"
        path = posixpath.join(folder, f"{cls}.java")
        x, y = words(rng)
        good, bad, n = f"test{camel([x])}", f"test{camel([y])}", rng.randint(3, 97)
        head = f"package {package};\n\n" if package else ""
        body = (f"  @Test\n  public void {good}() {{\n    long s = 0;\n"
                f"    for (int i = 0; i < {n}; i++) s += i;\n"
                f"    if (s != {n * (n - 1) // 2}L) {{\n"
                f"      throw new AssertionError(\"sum \" + s);\n    }}\n  }}\n\n"
                f"  @Test\n  public void {bad}() {{\n    int[] v = {{{n}, 1}};\n"
                f"    java.util.Arrays.sort(v);\n"
                f"    if (v[0] != {n}) throw new AssertionError(\"order \" + v[0]);\n  }}\n}}\n")
        junit4 = f"{head}import org.junit.Test;\n\npublic class {cls} {{\n{body}"
        jupiter = f"{head}import org.junit.jupiter.api.Test;\n\npublic class {cls} {{\n{body}"
        # the repository's own JUnit: Jupiter where its tests import it
        script = (f"if grep -rqs 'org.junit.jupiter' {shlex.quote(folder)}; then "
                  f"{put(path, jupiter)}; else {put(path, junit4)}; fi")
        fq = f"{package}.{cls}" if package else cls
        return Canary(path, script, {f"{fq}#{good}": "PASSED", f"{fq}#{bad}": "FAILED"})

    def exit_problem(self, code: int, statuses: dict[str, str]) -> str | None:
        if code == 2 and not statuses:
            return None  # javac failed: the tests are missing, the run invalid without a flag
        return plain_exit(code, statuses, ok=0)

    def built(self, log: str, statuses: dict[str, str]) -> bool | None:
        return "[repogym] javac failed" not in log
