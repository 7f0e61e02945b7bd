"""Writes the manual's example dataset: ``docs/examples/`` (run it again when the demo changes).

The README and the datasets page show ``repogym tasks add swebench FILE --instances ...
--repos DIR`` on a file they can run in CI, with no network: two demo tasks written as
SWE-bench publishes instances (no ``source``, no ``environment``: a repository, a version and
the published fields), a mirror of their repository as a git bundle, and the environment spec
``--env`` takes for a repository swebench has no spec of.

    .venv/bin/python tools/docs_examples.py
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

import yaml

from repogym.repo import export_tree, snapshot
from repogym.suite import load_suite

OUT = Path(__file__).resolve().parents[1] / "docs" / "examples"
IDS = ("demo__textkit-1", "demo__textkit-2")
FIELDS = ("instance_id", "repo", "base_commit", "problem_statement", "patch", "test_patch",
          "FAIL_TO_PASS", "PASS_TO_PASS")


def main() -> None:
    tasks = [t for t in load_suite("demo") if t.instance_id in IDS]
    rows = []
    for task in tasks:
        row = {k: v for k, v in task.to_dict().items() if k in FIELDS}
        row.update(version="0.4", created_at="2026-01-01T00:00:00Z", hints_text="",
                   environment_setup_commit=task.base_commit,
                   FAIL_TO_PASS=json.dumps(list(task.FAIL_TO_PASS)),
                   PASS_TO_PASS=json.dumps(list(task.PASS_TO_PASS)))
        rows.append(row)
    (OUT / "mirrors").mkdir(parents=True, exist_ok=True)
    (OUT / "swebench-demo.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    source, commit = tasks[0].source or "", tasks[0].base_commit
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "textkit"
        export_tree(source, None, tree)
        assert snapshot(tree) == commit, "the snapshot is the tasks' base commit"
        subprocess.run(["git", "bundle", "create", "--quiet",
                        str(OUT / "mirrors" / "demo__textkit.bundle"), "main"], cwd=tree,
                       check=True)
    env = tasks[0].environment
    spec = {"demo/textkit": {"0.4": {"python": env.python, "setup": list(env.setup),
                                     "test_cmd": env.test_cmd, "log_parser": env.log_parser}}}
    (OUT / "swebench-env.yaml").write_text(
        "# the environment of demo/textkit 0.4 (swebench has no spec of it)\n"
        + yaml.safe_dump(spec, sort_keys=False))


if __name__ == "__main__":
    main()
