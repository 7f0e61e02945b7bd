"""Builds the ``demo-langs`` suite: JavaScript, Go, Rust and Java tasks, three per repository.

    .venv/bin/python tasks/demo/langs/build.py --measure  # run the tests in Docker, write lists
    .venv/bin/python tasks/demo/langs/build.py            # rewrite tasks.jsonl from defs/
    .venv/bin/python tasks/demo/langs/build.py --check    # exit 1 if tasks.jsonl is stale

Same layout as the Python demo suite (``src/<repo>/`` holds the base with every task's bug,
``defs/<id>/`` the issue, the gold fix and the hidden tests). The test lists are never written
by hand: ``--measure`` builds each repository's image and runs the tests through the grader
twice without and twice with the fix (``repogym.tasks.validate.derive_lists``), and writes
``defs/<id>/lists.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from functools import cache
from pathlib import Path
from typing import Any

from repogym.repo import snapshot_commit
from repogym.schema import Task

SUITE = Path(__file__).resolve().parent
CREATED_AT = "2024-06-01T00:00:00Z"
ENVIRONMENTS: dict[str, dict[str, Any]] = {
    "querykit": {"language": "javascript", "runner": "jest",
                 "setup": ["npm install --no-audit --no-fund --loglevel=error"], "timeout": 300},
    "semver": {"language": "go", "runner": "gotest",
               "setup": ["go test -count=1 -run '^$' ./... && chmod -R a+rwX /opt/go/cache"],
               "timeout": 300},
    "runlength": {"language": "rust", "runner": "cargo",
                  "setup": ["cargo test --offline --no-run"], "timeout": 300},
    "romans": {"language": "java", "runner": "junit", "setup": [], "timeout": 300},
}
SPLITS = {"demo__querykit-3": "train", "demo__semver-2": "train", "demo__runlength-3": "train",
          "demo__romans-2": "train"}


@cache
def base_commit(repo: str) -> str:
    return snapshot_commit(SUITE / "src" / repo)


def task_ids() -> list[str]:
    return sorted(p.name for p in (SUITE / "defs").iterdir() if p.is_dir())


def repo_of(instance_id: str) -> str:
    return instance_id.split("__", 1)[1].rsplit("-", 1)[0]


def row(instance_id: str, lists: dict[str, list[str]] | None = None) -> dict[str, Any]:
    folder = SUITE / "defs" / instance_id
    repo = repo_of(instance_id)
    if lists is None:
        path = folder / "lists.json"
        lists = json.loads(path.read_text()) if path.exists() else {}
    return {
        "instance_id": instance_id,
        "repo": f"demo/{repo}",
        "base_commit": base_commit(repo),
        "problem_statement": (folder / "problem.md").read_text(encoding="utf-8").strip() + "\n",
        "patch": (folder / "fix.patch").read_text(encoding="utf-8"),
        "test_patch": (folder / "test.patch").read_text(encoding="utf-8"),
        "FAIL_TO_PASS": lists.get("FAIL_TO_PASS", []),
        "PASS_TO_PASS": lists.get("PASS_TO_PASS", []),
        "source": f"src/{repo}",
        "environment": ENVIRONMENTS[repo],
        "kind": "swe",
        "split": SPLITS.get(instance_id, "eval"),
        "created_at": CREATED_AT,
    }


def measure(instance_id: str) -> dict[str, list[str]]:
    from repogym.tasks.validate import derive_lists

    task = Task.from_dict(row(instance_id, {}), base_dir=SUITE)
    measured, reason = derive_lists(task)
    if measured is None:
        raise SystemExit(f"{instance_id}: {reason}")
    lists = {"FAIL_TO_PASS": list(measured.FAIL_TO_PASS),
             "PASS_TO_PASS": list(measured.PASS_TO_PASS)}
    (SUITE / "defs" / instance_id / "lists.json").write_text(json.dumps(lists, indent=1) + "\n")
    return lists


def render() -> str:
    return "\n".join(json.dumps(row(i), ensure_ascii=False) for i in task_ids()) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--measure", nargs="*", metavar="ID",
                        help="run the tests in Docker (every task, or these) and write lists")
    parser.add_argument("--check", action="store_true", help="exit 1 if tasks.jsonl is stale")
    args = parser.parse_args(argv)
    if args.measure is not None:
        for instance_id in args.measure or task_ids():
            lists = measure(instance_id)
            print(f"{instance_id}: {len(lists['FAIL_TO_PASS'])} FAIL_TO_PASS, "
                  f"{len(lists['PASS_TO_PASS'])} PASS_TO_PASS")
    text = render()
    path = SUITE / "tasks.jsonl"
    if args.check:
        fresh = path.exists() and path.read_text(encoding="utf-8") == text
        print("up to date" if fresh else f"{path} is out of date: run build.py")
        return 0 if fresh else 1
    path.write_text(text, encoding="utf-8")
    print(f"{len(task_ids())} tasks written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
