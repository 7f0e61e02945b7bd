"""Thin task images: a task made on a snapshot is its snapshot's image and one layer.

A replication or synthetic task is a snapshot of a repository plus a change to its library
files (``extra["original_commit"]`` names the snapshot). Its checks ran in the snapshot's image
with the change applied (:mod:`repogym.tasks.checking`); building the task's own image from
scratch would run the snapshot's whole setup again for every task (seconds and a few hundred MB
each). So such a task's image is the snapshot's image with one layer on top, made by a script:

- the change is applied to ``/testbed`` and folded into its one base commit (the snapshot's
  commit, which holds the unchanged code, is pruned: ``git log`` shows one commit, as in an
  image built from scratch);
- every file of ``/testbed`` gets the same timestamps, so no time tells which files changed,
  and the pristine copy the verified reset restores from is made again from the result;
- before anything is changed, the installed copies of the changed files are looked for by
  content: an install that copied them (not linked, not editable) would not see the change.
  Then the layer is not made, and the task's image is built from scratch as any other
  (tagged also under the thin image's name, so the task finds it there).

Only a change to ``.py`` files other than ``setup.py`` is applied this way: any other file
(a build configuration, a compiled extension's source) may change what the setup installs.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from repogym import settings
from repogym.errors import TaskError
from repogym.images.build import BUILD_DIR, Layer, LayerRun, build_layer
from repogym.images.recipe import (
    LABEL_COMMIT,
    LABEL_SPEC,
    LABEL_USER,
    PREAMBLE,
    PRISTINE,
    USER,
    WORKDIR,
    build_files,
    digest,
    settle_script,
)
from repogym.progress import Progress
from repogym.repo import git
from repogym.schema import Task

DERIVED_RECIPE = "1"
COPY_FOUND = 42  # the script's exit code when an installed copy of a changed file exists
STAMP = 946684800  # 2000-01-01, the snapshots' commit date: every file of /testbed gets it


def snapshot_task(task: Task) -> Task:
    """The task whose image is the snapshot's: the same environment at the snapshot."""
    return task.with_(base_commit=str(task.extra["original_commit"]), patch="",
                      FAIL_TO_PASS=(), PASS_TO_PASS=())


@functools.lru_cache(maxsize=4096)
def _change(source: str, old: str, new: str) -> tuple[tuple[str, str], ...]:
    """(status, path) of every file that differs between two commits of ``source``. Read once
    per process (an image's tag is asked for at every reset); a failed read raises, and is
    not cached."""
    out = git(source, "diff", "--name-status", "--no-renames", "-z", old, new)
    parts = [p for p in out.split("\0") if p]
    return tuple(zip(parts[0::2], parts[1::2], strict=True))


def change(task: Task) -> tuple[tuple[str, str], ...]:
    """The task's change from its snapshot, or () when it cannot be read."""
    head = task.extra.get("original_commit")
    if not head or not task.source:
        return ()
    try:
        return _change(str(task.source), str(head), task.base_commit)
    except (TaskError, OSError, ValueError):
        return ()


def derivable(task: Task) -> bool:
    """Whether the task's image is its snapshot's image and a thin layer (see the module)."""
    env = task.environment
    if env.language != "python" or env.image or task.test_patch.strip():
        return False
    paths = [path for _, path in change(task)]
    return bool(paths) and all(p.endswith(".py") and Path(p).name != "setup.py" for p in paths)


def spec(task: Task, snapshot_tag: str) -> dict[str, object]:
    return {"recipe": DERIVED_RECIPE, "from": snapshot_tag, "repo": task.repo,
            "commit": task.base_commit}


def tag(task: Task, snapshot_tag: str) -> str:
    """The thin image's name: the snapshot image's repository, another content hash."""
    name = snapshot_tag.rsplit(":", 1)[0]
    return f"{name}:{task_slug(snapshot_tag)}-t{digest(spec(task, snapshot_tag))}"


def task_slug(snapshot_tag: str) -> str:
    """The repository part of a repository image's tag (``slug-hash``: ``slug``)."""
    return snapshot_tag.rsplit(":", 1)[-1].rsplit("-", 1)[0][:60] or "repo"


# Run before the change, as root: exits COPY_FOUND when a changed file that exists at the
# snapshot has an installed copy outside /testbed with the same name and content.
_COPIES = f"""import os, sys, sysconfig, site
paths = [p for p in open(sys.argv[1]).read().split("\\0") if p]
wanted = {{}}
for rel in paths:
    full = os.path.join("{WORKDIR}", rel)
    if os.path.isfile(full) and not os.path.islink(full):
        with open(full, "rb") as f:
            wanted.setdefault(os.path.basename(rel), []).append((rel, f.read()))
roots = {{sysconfig.get_path(k) for k in ("purelib", "platlib")}}
roots.update(getattr(site, "getsitepackages", lambda: [])())
roots.update(p for p in sys.path if p and os.path.isdir(p))
for root in sorted(r for r in roots if r and os.path.isdir(r)):
    real = os.path.realpath(root)
    if real == "{WORKDIR}" or real.startswith("{WORKDIR}/"):
        continue
    for folder, dirs, files in os.walk(root):
        for name in files:
            for rel, data in wanted.get(name, ()):
                path = os.path.join(folder, name)
                if os.path.islink(path) or os.path.getsize(path) != len(data):
                    continue
                with open(path, "rb") as f:
                    if f.read() == data:
                        print("REPOGYM-COPY-FOUND", rel, path)
                        sys.exit({COPY_FOUND})
"""


def _script(deleted: list[str]) -> str:
    parents = " ".join(f"'{Path(p).parent}'" for p in deleted if str(Path(p).parent) != ".")
    return PREAMBLE + f"""
cd {WORKDIR}
phase copies
PY=$(command -v python || command -v python3)
"$PY" {BUILD_DIR}/copies.py {BUILD_DIR}/paths
phase change
git apply --binary --whitespace=nowarn {BUILD_DIR}/change.patch
for d in {parents}; do [ -d "$d" ] && rmdir -p --ignore-fail-on-non-empty "$d" || true; done
find {WORKDIR} -name __pycache__ -type d -prune -exec rm -rf {{}} +
phase finish
{settle_script(WORKDIR)}
git -C {WORKDIR} reflog expire --expire=now --all && git -C {WORKDIR} gc -q --prune=now
test "$(git -C {WORKDIR} rev-list --all | wc -l)" = 1
chown -R {USER}:{USER} {WORKDIR}
find {WORKDIR} -exec touch -h -d @{STAMP} {{}} +
rm -rf {PRISTINE}/testbed && cp -al {WORKDIR} {PRISTINE}/testbed
rm -rf {BUILD_DIR}
"""


def derive(task: Task, snapshot_tag: str, progress: Progress) -> LayerRun:
    """Makes the thin image of ``task`` on ``snapshot_tag``; the run's exit code is
    ``COPY_FOUND`` when it cannot (see the module)."""
    changed = change(task)
    head = str(task.extra["original_commit"])
    patch = git(str(task.source), "diff", "--no-color", "--no-ext-diff", "--binary",
                "--no-renames", head, task.base_commit)
    files = {**build_files(), f"{BUILD_DIR}/change.patch": patch.encode("utf-8",
                                                                        "surrogateescape"),
             f"{BUILD_DIR}/paths": "\0".join(p for _, p in changed).encode(),
             f"{BUILD_DIR}/copies.py": _COPIES.encode()}
    name = tag(task, snapshot_tag)
    labels = {LABEL_SPEC: digest(spec(task, snapshot_tag)), LABEL_USER: USER,
              "org.repogym.derived-from": snapshot_tag}
    progress(f"building {name} (the image of {snapshot_tag} with the task's change)")
    run = build_layer(Layer(
        image=snapshot_tag, tag=name, script=_script([p for s, p in changed if s == "D"]),
        files=files, labels=labels, workdir=WORKDIR, timeout=settings.BUILD_TIMEOUT.number(),
        script_labels=(LABEL_COMMIT,)), progress)
    if run.exit_code == COPY_FOUND:
        found = [line for line in run.log.splitlines() if line.startswith("REPOGYM-COPY-FOUND")]
        progress(f"{task.instance_id}: an installed copy of a changed file "
                 f"({json.dumps(found[-1:])}): its image is built from scratch")
    return run
