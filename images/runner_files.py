"""The harness's test-runner helpers that toolchain images carry under ``/opt/repogym``.

They are the grader's, not the repository's: root's files outside ``/testbed`` that the tests'
user can read but not change. ``images/data/runners/`` holds their sources.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

FILES = Path(__file__).resolve().parent / "data" / "runners"
# (name in the build context under repogym/, file under images/data/runners)
SHIPPED = {
    "mocha-reporter.js": "mocha-reporter.js",
    "cargo-runner.sh": "cargo-runner.sh",
    "junit/RepogymListener.java": "RepogymListener.java",
}
JUNIT_JARS = "/usr/share/java"
JUNIT_PLATFORM = (f"{JUNIT_JARS}/junit-platform-console-standalone.jar:"
                  f"{JUNIT_JARS}/junit-vintage-engine.jar:{JUNIT_JARS}/junit4.jar:"
                  f"{JUNIT_JARS}/hamcrest.jar")
# compiled once into the image; the launcher finds it through ServiceLoader on its class path
BUILD_JAVA_LISTENER = (
    "cd /opt/repogym/junit && mkdir -p classes/META-INF/services && "
    f"javac -nowarn -d classes -cp {JUNIT_PLATFORM} RepogymListener.java && "
    "echo org.repogym.junit.RepogymListener > "
    "classes/META-INF/services/org.junit.platform.launcher.TestExecutionListener && "
    "jar cf repogym-listener.jar -C classes . && rm -rf classes && cd /"
)


def context() -> dict[str, bytes]:
    """Build-context files: ``repogym/<name>``."""
    return {f"repogym/{name}": (FILES / source).read_bytes() for name, source in SHIPPED.items()}


def digest() -> str:
    h = hashlib.sha256()
    for name, data in sorted(context().items()):
        h.update(name.encode() + b"\0" + data + b"\0")
    return h.hexdigest()[:12]
