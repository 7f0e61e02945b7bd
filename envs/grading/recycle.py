"""Grading containers reset in place, for the many runs of task creation.

Grading an agent's patch always takes a container nobody used (the pool removes a grading
container once it has graded). Task creation runs the tests of one image dozens of times, on
code the harness wrote itself; there a used grading container is put back as it started and
handed out again, as the pool does with agent containers (``SandboxPool(reset=...)``).

The reset is verified, or the container is removed: every process of the tests' user gone,
``/testbed`` and the user's home refilled from the image's pristine copy and compared with it,
every other place the tests' user can write (``/tmp``, ``/var/tmp``, ``/dev/shm``,
``/dev/mqueue``, the harness's folder) emptied and seen empty, System V IPC objects removed,
and no other mount the user could write to (the root file system is read-only: a container
with a writable root is never reset). The root runner and the waiting pytest are started
afresh. So no run sees what an earlier run in the same container left.
"""

from __future__ import annotations

import shlex

from repogym.envs.grading.box import GradingBox
from repogym.envs.grading.pytest_run import TEST_UID
from repogym.errors import RepogymError
from repogym.sandbox.docker import DockerSandbox
from repogym.sandbox.pristine import PRISTINE, fill_script

EMPTIED = ("/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue", "/opt/repogym-grade")

# Run as the tests' user once none of its processes is left: System V IPC objects can be
# removed only by their owner (root would need CAP_SYS_ADMIN, which no container has), and the
# mounts the user can write to are best asked as the user.
USER_SCRIPT = r"""
command -p ipcrm -a 2>/dev/null
[ -z "$(command -p ipcs -m -q -s 2>/dev/null | grep -E '^0x')" ] || { echo IPC_LEFT; exit 9; }
exec python3 -I -c '
import os, sys
allowed = set(sys.argv[1:])
points = []
with open("/proc/mounts") as f:
    for line in f:
        fields = line.split()
        if "rw" in fields[3].split(",") and fields[1] not in allowed \
                and not fields[1].startswith(("/proc", "/sys")):
            points.append(fields[1])
bad = [p for p in points if os.path.isdir(p) and os.access(p, os.W_OK)]
print("WRITABLE " + " ".join(bad) if bad else "USER_OK")
' "$@"
"""


def reset_script(box: DockerSandbox) -> str:
    """The root part of the reset and its checks (see the module docstring)."""
    targets = box.fill_targets()
    emptied = " ".join(shlex.quote(p) for p in EMPTIED)
    compare = "\n".join(
        f"diff -rq --no-dereference {shlex.quote(src)} {shlex.quote(dst)} >/dev/null "
        f"|| {{ echo DIFFERS {shlex.quote(dst)}; exit 7; }}"
        for dst, src in targets.items())
    return f"""set -u
pkill -9 -u {TEST_UID} 2>/dev/null; for i in 1 2 3 4 5 6 7 8 9 10; do \
pgrep -u {TEST_UID} >/dev/null || break; sleep 0.05; pkill -9 -u {TEST_UID} 2>/dev/null; done
pgrep -u {TEST_UID} >/dev/null && {{ echo PROCESSES_LEFT; exit 4; }}
{fill_script(targets, clear=True)}
for d in {emptied}; do [ -d "$d" ] && find "$d" -mindepth 1 -delete 2>/dev/null; done
{compare}
for d in {emptied}; do
  [ -d "$d" ] && [ -n "$(find "$d" -mindepth 1 -print -quit 2>/dev/null)" ] \
    && {{ echo LEFT "$d"; exit 8; }}
done
echo ROOT_DONE
"""


def reset_grader(box: DockerSandbox) -> bool:
    """Resets a used grading container in place; False (and nothing started) when the reset
    cannot be verified, and the caller removes the container."""
    if not isinstance(box, GradingBox):
        return False  # no runner to restart: not one of the grader's
    if not box.read_only or PRISTINE not in " ".join(box.fill_targets().values()):
        return False  # a writable root could hold leftovers anywhere
    box.close_processes()
    try:
        result = box.exec(["bash", "-c", reset_script(box)], user="root", timeout=300)
        if result.exit_code != 0 or "ROOT_DONE" not in result.output:
            return False
        allowed = [*box.fill_targets(), *EMPTIED]
        result = box.exec(["bash", "-c", USER_SCRIPT, "reset", *allowed], timeout=60)
        if result.exit_code != 0 or "USER_OK" not in result.output:
            return False
        box.start_processes(warm=True)
    except RepogymError:
        return False
    return box.alive()
