"""Tests that need the network, found by running them without it.

Some published instances have tests that reach real hosts (psf/requests' tests call
``http://httpbin.org``). Grading runs without a network, so the gold patch fails them and
validation would reject the whole instance. :func:`network_failures` runs the tests that the
gold patch failed once more, in a container of the task's image with no network, and reads
pytest's failure summary: a test whose failure is a connection error is taken out of the
task's lists, with the reason kept in the task (``dropped_tests``); other failures are left
alone, so a real break still rejects the instance.
"""

from __future__ import annotations

import re
import shlex

from repogym.sandbox.base import SandboxConfig
from repogym.sandbox.docker import DockerSandbox
from repogym.schema import Task

NETWORK_ERRORS = re.compile(
    r"ConnectionError|NewConnectionError|MaxRetryError|ConnectTimeout|ProxyError|gaierror|"
    r"Name or service not known|Temporary failure in name resolution|No address associated|"
    r"Network is unreachable|Failed to establish a new connection|nodename nor servname|"
    r"Connection refused|getaddrinfo failed|urlopen error", re.I)
# pytest's section header for each failure: "____ TestClass.test_name[param] ____", with as
# little as one underscore each side when the name is long; not a traceback's "_ _ _" rule
_SECTION = re.compile(r"^_+ (?:(?:ERROR|FAILURE) (?:at|collecting) \S+ (?:of )?)?"
                      r"(?![_ ]+$)(.+?) _+$", re.M)
_CLOSING = re.compile(r"^=+ .*(short test summary|failed|passed|error).* =+$", re.M)


def network_failures(task: Task, image: str, failing: list[str]) -> dict[str, str]:
    """Of the ``failing`` test ids (failed with the gold patch), those that fail for want of
    a network, with pytest's one-line reason."""
    if not failing:
        return {}
    files = sorted({t.split("::")[0] for t in failing})
    script = "\n".join([
        "set -e", "cd /testbed",
        "git apply /tmp/repogym-gold.patch", "git apply /tmp/repogym-test.patch", "set +e",
        f"{task.environment.test_cmd} -p no:cacheprovider --tb=short "
        f"{' '.join(shlex.quote(f) for f in files)}",
    ])
    config = SandboxConfig(image=image, role="probe", shell=False, read_only=False,
                           memory="4g", cpus=2.0, pids_limit=1024, output_limit=400_000)
    with DockerSandbox(config) as box:
        box.put_files({"repogym-gold.patch": task.patch.encode(),
                       "repogym-test.patch": task.test_patch.encode()}, "/tmp")
        result = box.exec(["bash", "-c", script], timeout=task.environment.timeout)
    sections = _sections(result.output)
    out: dict[str, str] = {}
    for test in failing:
        # pytest heads a failure with the test's name less its file ("Class.test[param]");
        # SWE-bench cuts ids at a space, so a cut name matches as a prefix
        name = ".".join(test.split("::")[1:]) or test
        text = sections.get(name) or next(
            (body for head, body in sections.items() if head.startswith(name)), "")
        found = NETWORK_ERRORS.search(text)
        if found:
            line = next(x for x in text.splitlines() if found.group(0) in x)
            out[test] = f"needs the network: {line.strip()[:160]}"
    return out


def _sections(output: str) -> dict[str, str]:
    """Each failure's traceback, by the name in its section header."""
    heads = list(_SECTION.finditer(output))
    if heads:  # the last one ends where pytest's closing summaries start
        tail = _CLOSING.search(output, heads[-1].end())
        output = output[: tail.start()] if tail else output
    return {m.group(1): output[m.end():heads[i + 1].start() if i + 1 < len(heads) else None]
            for i, m in enumerate(heads)}
