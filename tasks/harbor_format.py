"""Harbor task folders, out and in.

:func:`export_task` writes one task as a Harbor task folder:

    <instance_id>/
      task.toml          timeouts, resources, no internet; [metadata] names the task's origin
      instruction.md     the problem statement
      environment/       Dockerfile and the repository at the base commit (repo/), one commit
      tests/test.sh      the verifier: test patch, the test command, a reward file
      tests/grade.py     reads the test log; reward 1 only if every listed test passed
      tests/config.json  what repogym needs to import the task again (lists, test command...)
      tests/test.patch
      solution/solve.sh  applies the gold patch

The verifier runs where Harbor runs it (the agent's container, after the agent). The other
way, :func:`import_task` reads such a folder back into a repogym task, graded as every task is
(a fresh grading container, the test patch, canaries); a Harbor task whose verifier is only a
script (no ``tests/config.json``) has no per-test lists to grade and is refused with that
reason.
"""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path
from typing import Any

from repogym.envs.grading.grader import test_files
from repogym.envs.grading.stage import header_paths
from repogym.errors import TaskError
from repogym.repo import export_tree, git, snapshot
from repogym.schema import Task

CONFIG_KEYS = ("instance_id", "repo", "base_commit", "FAIL_TO_PASS", "PASS_TO_PASS", "version",
               "kind", "split", "environment")
HEREDOC = "REPOGYM_PATCH_EOF"

GRADE_PY = '''\
"""Reward 1.0 when every FAIL_TO_PASS and PASS_TO_PASS test passed in the log, else 0.0."""
import json, re, sys

config = json.load(open("/tests/config.json"))
log = open(sys.argv[1], errors="replace").read()
status = {}
for line in log.splitlines():
    m = re.match(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\\S+)", line)
    if m:
        status.setdefault(m.group(2), m.group(1))
    m = re.match(r"^(\\S+::\\S+) (PASSED|FAILED|ERROR|SKIPPED|XFAIL)", line)
    if m:
        status.setdefault(m.group(1), m.group(2))
wanted = config["FAIL_TO_PASS"] + config["PASS_TO_PASS"]
ok = all(status.get(t) == "PASSED" or any(k.startswith(t) and v == "PASSED"
                                          for k, v in status.items()) for t in wanted)
print(json.dumps({"passed": ok, "tests": len(wanted)}))
open("/logs/verifier/reward.txt", "w").write("1.0" if ok else "0.0")
'''


def _toml_str(text: str) -> str:
    return json.dumps(text)  # a JSON string is a valid TOML basic string


def task_toml(task: Task) -> str:
    env = task.environment
    return "\n".join([
        'schema_version = "1.1"', "",
        "[metadata]",
        f"source = {_toml_str('repogym')}",
        f"instance_id = {_toml_str(task.instance_id)}",
        f"repo = {_toml_str(task.repo)}",
        f"kind = {_toml_str(task.kind)}",
        "", "[verifier]", f"timeout_sec = {float(env.timeout)}",
        "", "[agent]", "timeout_sec = 1800.0",
        "", "[environment]", "build_timeout_sec = 1800.0", "cpus = 2", "memory_mb = 4096",
        "allow_internet = false", "",
    ])


def dockerfile(task: Task) -> str:
    env = task.environment
    base = env.image or f"python:{env.python}-slim"
    setup = "".join(f"RUN {cmd}\n" for cmd in env.setup)
    return f"""FROM {base}
RUN (command -v git >/dev/null || (apt-get update && apt-get install -y --no-install-recommends \\
      git && rm -rf /var/lib/apt/lists/*)) && python -m pip install -q pytest
COPY repo /testbed
WORKDIR /testbed
{setup}"""


def test_sh(task: Task) -> str:
    files = " ".join(shlex.quote(f) for f in _test_files(task))
    touched = " ".join(shlex.quote(f) for f in header_paths(task.test_patch))
    return f"""#!/bin/bash
# repogym's verifier: the task's test files as the base commit had them, its test patch over
# the agent's work, its tests, a reward file.
set -uo pipefail
mkdir -p /logs/verifier
cd /testbed
for f in {touched}; do git checkout -q HEAD -- "$f" 2>/dev/null || rm -f "$f"; done
git apply /tests/test.patch || {{ echo 0.0 > /logs/verifier/reward.txt; exit 0; }}
{task.environment.test_cmd} {files} > /logs/verifier/test_output.txt 2>&1
python3 /tests/grade.py /logs/verifier/test_output.txt
"""


def _test_files(task: Task) -> list[str]:
    return test_files(task)


def export_task(task: Task, out: Path) -> Path:
    """Writes ``task`` as a Harbor task folder under ``out``; returns the folder."""
    if not task.source:
        raise TaskError(f"{task.instance_id} has no source: the Harbor environment needs the "
                        "repository")
    folder = out / task.instance_id
    if folder.exists():
        shutil.rmtree(folder)
    for sub in ("environment", "tests", "solution"):
        (folder / sub).mkdir(parents=True)
    (folder / "task.toml").write_text(task_toml(task))
    (folder / "instruction.md").write_text(task.problem_statement.rstrip() + "\n")
    repo = folder / "environment" / "repo"
    export_tree(task.source, task.base_commit, repo)
    snapshot(repo)  # one commit, as the agent sees it in repogym
    (folder / "environment" / "Dockerfile").write_text(dockerfile(task))
    config = {k: v for k, v in task.to_dict().items() if k in CONFIG_KEYS}
    (folder / "tests" / "config.json").write_text(json.dumps(config, indent=1) + "\n")
    (folder / "tests" / "test.patch").write_text(task.test_patch)
    (folder / "tests" / "grade.py").write_text(GRADE_PY)
    _script(folder / "tests" / "test.sh", test_sh(task))
    _script(folder / "solution" / "solve.sh",
            f"#!/bin/bash\nset -e\ncd /testbed\ngit apply - <<'{HEREDOC}'\n"
            f"{task.patch.rstrip(chr(10))}\n{HEREDOC}\n")
    return folder


def _script(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o755)


def task_folders(root: Path) -> list[Path]:
    """``root`` itself when it is a task folder, else its task folders."""
    if (root / "task.toml").exists():
        return [root]
    found = sorted(p.parent for p in root.glob("*/task.toml"))
    if not found:
        raise TaskError(f"{root} holds no Harbor task (no task.toml in it or its folders).")
    return found


def import_task(folder: Path, split: str = "eval") -> Task:
    """A Harbor task folder as a repogym task (see the module docstring)."""
    config_file = folder / "tests" / "config.json"
    if not config_file.exists():
        raise TaskError(f"{folder.name}: its verifier is a script with no per-test lists "
                        "(tests/config.json); repogym grades named tests, so it cannot grade "
                        "this task")
    config: dict[str, Any] = json.loads(config_file.read_text())
    solve = (folder / "solution" / "solve.sh").read_text()
    start = solve.index(f"<<'{HEREDOC}'\n") + len(f"<<'{HEREDOC}'\n")
    patch = solve[start:solve.rindex(f"\n{HEREDOC}")] + "\n"
    repo = folder / "environment" / "repo"
    head = git(repo, "rev-parse", "HEAD").strip()  # the snapshot's one commit
    return Task.from_dict({
        **config, "split": split,
        "problem_statement": (folder / "instruction.md").read_text(),
        "patch": patch, "test_patch": (folder / "tests" / "test.patch").read_text(),
        "base_commit": head, "upstream_base_commit": config["base_commit"],
        "source": str(repo), "harbor_task": str(folder),
    })
