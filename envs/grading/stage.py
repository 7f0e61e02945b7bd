"""Staging a grading container in as few round trips as possible.

Which paths the agent's patch touches is read on the host, by git itself (``git apply
--numstat``) and from the patch's own headers, before anything reaches the container. So the
upload, the patch, the removal of protected changes, the task's test patch, the canaries and the
locks are one root script (sent to the container's root runner). The grading container's git
reads the patch again while applying it; a path it sees that the host did not invalidates the
run.

Only a patch that edits a file judged by content (``setup.cfg``, ``pyproject.toml``,
``setup.py``) needs a second round trip: its old and new text come back, the host decides, and
the rest of the staging runs after that.
"""

from __future__ import annotations

import base64
import io
import re
import shlex
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from repogym.envs.grading.flags import Flag, Protected, tampered_flags
from repogym.envs.grading.protect import CONTENT_CHECKED, protected_reason, pytest_settings
from repogym.errors import GradingError

if TYPE_CHECKING:
    from repogym.envs.grading.report import GradingReport

GRADE_DIR = "/opt/repogym-grade"  # the harness's files in a grading container
OUT = f"{GRADE_DIR}/out"
_MARK = re.compile(r"^__RG_([A-Z0-9_]+)=(.*)$", re.M)


def patch_paths(patch: str) -> list[str]:
    """Every path a patch may touch: what git's own parser reports plus what its headers name
    (a rename's old path, which ``--numstat`` leaves out, included)."""
    if not patch.strip():
        return []
    with tempfile.TemporaryDirectory(prefix="repogym-numstat-") as tmp:
        try:
            proc = subprocess.run(["git", "apply", "--numstat", "-z", "-"], cwd=tmp,
                                  input=patch.encode("utf-8", errors="surrogateescape"),
                                  capture_output=True, timeout=60)
        except FileNotFoundError as exc:
            raise GradingError("grading reads patches with git; install git on this host "
                               "(apt-get install git).") from exc
    return sorted(set(numstat_paths(proc.stdout)) | set(header_paths(patch)))


def numstat_paths(raw: bytes) -> list[str]:
    """Paths from ``git apply --numstat -z`` (a rename may list both of its paths)."""
    out: list[str] = []
    fields = raw.split(b"\0")
    i = 0
    while i < len(fields):
        entry = fields[i]
        if not entry:
            i += 1
            continue
        parts = entry.split(b"\t", 2)
        if len(parts) == 3 and parts[2]:
            out.append(parts[2].decode("utf-8", errors="surrogateescape"))
            i += 1
        else:  # "added\tdeleted\t" then old and new paths as separate fields
            out += [f.decode("utf-8", errors="surrogateescape") for f in fields[i + 1 : i + 3]]
            i += 3
    return sorted(dict.fromkeys(out))


_DIFF_PATH = re.compile(r"^(?:\+\+\+ b/|--- a/|rename (?:from|to) |copy (?:from|to) )(.+?)\t?$",
                        re.M)


def header_paths(patch: str) -> list[str]:
    """The paths a git diff's headers name."""
    paths = [m.group(1).strip('"') for m in _DIFF_PATH.finditer(patch)]
    for line in patch.splitlines():
        if line.startswith("diff --git a/") and " b/" in line:
            paths.append(line[len("diff --git a/") :].split(" b/", 1)[1])
    return sorted({p for p in paths if p and p != "/dev/null"})


def deleted_paths(patch: str) -> set[str]:
    """The paths a git diff deletes (its ``--- a/PATH`` followed by ``+++ /dev/null``)."""
    return set(re.findall(r"^--- a/(.+?)\t?\n\+\+\+ /dev/null$", patch, re.M))


def protected_by_name(changed: list[str], test_files: frozenset[str]) -> dict[str, Protected]:
    return {p: r for p in changed if (r := protected_reason(p, test_files))}


def content_checked(changed: list[str], stripped: dict[str, Protected]) -> list[str]:
    return [p for p in changed if p.rsplit("/", 1)[-1] in CONTENT_CHECKED and p not in stripped]


def config_changed(path: str, before: str, after: str, tox: bool = False) -> bool:
    """Whether a change to a file judged by content changes the test run's configuration
    (``tox``: the test command runs tox)."""
    name = path.rsplit("/", 1)[-1]
    return pytest_settings(name, before, tox) != pytest_settings(name, after, tox)


@dataclass
class Staged:
    """What the staging script reported."""

    applied: bool = False
    apply_log: str = ""
    container_paths: list[str] = field(default_factory=list)
    contents: dict[str, tuple[str, str]] = field(default_factory=dict)  # path: (before, after)
    canary: str | None = None  # the planter's report (JSON), None when it did not report
    done: bool = False  # the whole staging ran (not only its first part)


def upload(files: dict[str, str]) -> bytes:
    """A tar archive of ``files`` under ``repogym-grade/``, for ``tar -x -C /opt``."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, text in files.items():
            data = text.encode("utf-8", errors="surrogateescape")
            info = tarfile.TarInfo(f"repogym-grade/{name}")
            info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _unb64(text: str) -> str:
    return base64.b64decode(text.strip() or b"").decode("utf-8", errors="replace")


def apply_script(nonempty: bool, checked: list[str]) -> str:
    """Part one: unpack the upload (on stdin), read and apply the agent's patch, and send back
    the old and new text of files judged by content."""
    lines = ["set -u", "tar -x -f - -C /opt --no-same-owner || { echo UPLOAD_FAILED; exit 4; }",
             "cd /testbed"]
    if nonempty:
        lines += [
            f'printf "__RG_NUMSTAT=%s\\n" '
            f'"$(git apply --numstat -z {GRADE_DIR}/agent.patch | base64 -w0)"',
            f"git apply --binary --whitespace=nowarn {GRADE_DIR}/agent.patch "
            f">{GRADE_DIR}/apply.log 2>&1",
            "__rg_applied=$?",
            f'printf "__RG_APPLY=%s %s\\n" $__rg_applied '
            f'"$(tail -c 2000 {GRADE_DIR}/apply.log | base64 -w0)"',
        ]
    else:
        lines += ["__rg_applied=0", 'echo "__RG_APPLY=0 "']
    for i, path in enumerate(checked):
        q = shlex.quote(path)
        lines.append(f'printf "__RG_BEFORE{i}=%s\\n" '
                     f'"$(git show HEAD:{q} 2>/dev/null | base64 -w0)"')
        lines.append(f'printf "__RG_AFTER{i}=%s\\n" "$(base64 -w0 {q} 2>/dev/null)"')
    return "\n".join(lines) + "\n"


# The names pytest and Python read from a folder on their own: in a folder opened to the tests
# (``opened``), each is kept root's, or made a root-owned link to nowhere where it is absent, so
# that what the tests write can change neither this run's collection nor a later run's.
RESERVED = ("conftest.py", "__pycache__", "pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg",
            "pyproject.toml")
NOWHERE = "/proc/.repogym-reserved"  # nothing can be made there, by root or anyone


def open_script(opened: list[str]) -> str:
    """Shell that opens ``opened`` (folders under /testbed) to the tests as /tmp is open:
    root's, everyone may add files, only a file's owner may remove or rename it; the reserved
    names in each stay root's (see :data:`RESERVED`)."""
    if not opened:
        return ""
    qopened = " ".join(shlex.quote(d) for d in opened)
    names = " ".join(RESERVED)
    return f"""for d in {qopened}; do
  [ -d "$d" ] && [ ! -L "$d" ] || continue
  chown root:root -- "$d"; chmod 1777 -- "$d"
  for n in {names}; do
    if [ -L "$d/$n" ]; then chown -h root:root -- "$d/$n"
    elif [ -e "$d/$n" ]; then chown -R root:root -- "$d/$n"; chmod -R go-w -- "$d/$n"
    else ln -s {NOWHERE} "$d/$n"; fi
  done
done
"""


def finish_script(stripped: list[str], plant: bool, locked: list[str], dirs: list[str],
                  prelude: str = "", opened: list[str] | None = None) -> str:
    """Part two: ``prelude`` (the reporter's collector starts there, while the rest runs),
    take out protected changes (only where the patch applied), apply the task's test patch,
    plant the canaries and disguise the test files (``plant.py``, sent with the upload,
    decides where), and make test files and their folders root's; ``opened`` folders are then
    open to the tests (:func:`open_script`)."""
    restore = "".join(
        f"  if git cat-file -e HEAD:{shlex.quote(p)} 2>/dev/null; then "
        f"git checkout -q HEAD -- {shlex.quote(p)}; else rm -rf -- {shlex.quote(p)}; "
        "fi 2>/dev/null\n"
        for p in stripped)
    # the report line is whole however long (a disguise of hundreds of hidden tests runs to
    # tens of kB); what else the planter says is cut. Root's files, gone before any test runs.
    planted = f"{GRADE_DIR}/planted"
    planter = (f"(umask 077; : >{planted}.out; : >{planted}.err)\n"
               f"python3 -I -S {GRADE_DIR}/plant.py {GRADE_DIR}/canary.json "
               f">>{planted}.out 2>>{planted}.err; tail -c 4000 {planted}.err; "
               f"grep -a '^__RG_CANARY=' {planted}.out || tail -c 4000 {planted}.out; "
               f"rm -f {planted}.out {planted}.err {GRADE_DIR}/canary.json {GRADE_DIR}/plant.py "
               f"{GRADE_DIR}/disguise.py\n") if plant else ""
    qlocked = " ".join(shlex.quote(p) for p in locked)
    qdirs = " ".join(shlex.quote(d) for d in dirs)
    return f"""{prelude}cd /testbed
if [ "$__rg_applied" = 0 ]; then :
{restore}fi
if [ -s {GRADE_DIR}/test.patch ]; then git apply --binary --whitespace=nowarn \
  {GRADE_DIR}/test.patch || {{ echo __RG_TEST_PATCH=failed; exit 3; }}; fi
{planter}mkdir -p {OUT} && chown 1000:1000 {OUT} 2>/dev/null || chmod 777 {OUT}
locked=({qlocked})
files=(); for f in "${{locked[@]}}"; do [ -e "$f" ] && files+=("$f"); done
dirs=(); for d in {qdirs}; do [ -d "$d" ] && dirs+=("$d"); done
[ ${{#files[@]}} = 0 ] || {{ chown root:root -- "${{files[@]}}"; chmod 644 -- "${{files[@]}}"; }}
[ ${{#dirs[@]}} = 0 ] || {{ chown root:root -- "${{dirs[@]}}"; chmod 755 -- "${{dirs[@]}}"; }}
{open_script(opened or [])}echo __RG_STAGED=1
"""


def resume_header(applied: bool) -> str:
    """What part two needs from part one when it runs in an exec of its own."""
    return f"set -u\n__rg_applied={0 if applied else 1}\n"


def parse(output: str, checked: list[str]) -> Staged:
    marks = dict(_MARK.findall(output))
    if "UPLOAD_FAILED" in output:
        raise GradingError(f"could not upload the patches into the grading container: "
                           f"{output[-500:]}")
    if marks.get("TEST_PATCH") == "failed":
        raise GradingError("the task's test_patch does not apply to its image; run "
                           f"`repogym tasks validate` on the suite. {output[-800:]}")
    if "APPLY" not in marks:
        raise GradingError(f"the grading container's staging script stopped early: "
                           f"{output[-800:]}")
    code, _, log = marks["APPLY"].partition(" ")
    staged = Staged(applied=code == "0", apply_log=_unb64(log),
                    container_paths=numstat_paths(base64.b64decode(marks.get("NUMSTAT", ""))))
    staged.contents = {p: (_unb64(marks.get(f"BEFORE{i}", "")), _unb64(marks.get(f"AFTER{i}", "")))
                       for i, p in enumerate(checked)}
    staged.canary = marks.get("CANARY")
    staged.done = marks.get("STAGED") == "1"
    return staged


def run_staging(root: Callable[..., tuple[int, str]], upload: bytes, patch: str,
                checked: list[str], stripped: dict[str, Protected], finish: Callable[[], str],
                changed: Callable[[str, str, str], bool], reason: Protected
                ) -> tuple[Staged, str]:
    """Stages a grading container with ``root`` (a root script runner: script, ``data=``
    its stdin): part one unpacks ``upload`` and applies the patch; when ``checked`` files
    are judged by content, their old and new text come back first, each that ``changed``
    joins ``stripped`` with ``reason``, and part two (``finish()``, built once ``stripped``
    is final) runs in an exec of its own; otherwise both parts run in one. Returns what the
    script reported and its output."""
    first = apply_script(bool(patch.strip()), checked)
    if checked:  # the host must read those files before it knows what to strip
        _, out = root(first, data=upload)
        staged = parse(out, checked)
        for path in checked:
            if staged.applied and changed(path, *staged.contents[path]):
                stripped[path] = reason
        _, more = root(resume_header(staged.applied) + finish())
        out += more
    else:
        _, out = root(first + finish(), data=upload)
    staged = parse(out, checked)
    require_done(staged, out)
    return staged, out


def require_done(staged: Staged, output: str) -> None:
    if not staged.done:
        raise GradingError(f"the grading container's staging did not finish: {output[-800:]}")


def record(report: GradingReport, staged: Staged, predicted: list[str],
           stripped: dict[str, Protected]) -> None:
    """What staging did, in the report: the patch applied or not, what it changes, what was
    removed from it (with a flag per reason), and a path only the container's git saw."""
    report.patch_applied = staged.applied
    if not staged.applied:
        report.flags.append(Flag.PATCH_FAILED)
        report.log_tail = staged.apply_log[-2000:]
        stripped = {}  # nothing of the patch reached the tests: nothing was removed from it
    else:
        report.changed = list(predicted)
        unseen = sorted(set(staged.container_paths) - set(predicted))
        if unseen:
            report.invalidate(f"the grading container's git reads paths the host did not: "
                              f"{unseen[:5]}", Flag.PATCH_MISMATCH)
    report.stripped = stripped
    report.flags += tampered_flags(stripped)
