#!/usr/bin/env python3
"""Writes SWE-bench Multilingual records (the published schema) for google/gson pull requests
from a mirror, for measuring ``repogym tasks add swebench`` where the dataset file is absent.

Each pull request is its squash-merge commit on the mirror: the base is its parent, the patch
its changes outside ``src/test/``, the test patch the rest; the lists are those the swebench
4.1 spec marks as FAIL_TO_PASS and PASS_TO_PASS (comments in ``SPECS_GSON``). With
``--refused``, records of three Multilingual repositories that cannot be built here are added
(no mirror is needed to refuse them).

    python tools/multilingual_gson.py /work/.mirror/google+gson/repo gson.jsonl 2158 1014
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

P, G = "com.google.gson.functional.PrimitiveTest#", "com.google.gson."
# pull request -> (FAIL_TO_PASS, PASS_TO_PASS), as swebench 4.1's spec comments give them
LISTS: dict[str, tuple[list[str], list[str]]] = {
    "2158": ([P + f"test{t}Serialization" for t in ("Byte", "Short", "Int", "Long", "Float",
                                                     "Double")],
             [P + "testPrimitiveIntegerAutoboxedSerialization",
              P + "testPrimitiveIntegerAutoboxedInASingleElementArraySerialization",
              P + "testReallyLongValuesSerialization",
              P + "testPrimitiveLongAutoboxedSerialization"]),
    "2311": ([G + "JsonPrimitiveTest#testEqualsIntegerAndBigInteger"],
             [G + "JsonPrimitiveTest#testLongEqualsBigInteger",
              G + "JsonPrimitiveTest#testEqualsAcrossTypes"]),
    "2479": ([G + "GsonBuilderTest#testRegisterTypeAdapterForObjectAndJsonElements",
              G + "GsonBuilderTest#testRegisterTypeHierarchyAdapterJsonElements"],
             [G + "GsonBuilderTest#testModificationAfterCreate"]),
    "1014": ([G + "internal.bind.JsonTreeReaderTest#testSkipValue_emptyJsonObject",
              G + "internal.bind.JsonTreeReaderTest#testSkipValue_filledJsonObject"], []),
}
REFUSED = [("tokio-rs/tokio", "6724"), ("vuejs/core", "11899"),
           ("projectlombok/lombok", "3602")]


def git(mirror: Path, *args: str) -> str:
    # bytes, decoded without newline translation: gson's files have CRLF line endings
    return subprocess.run(["git", "-C", str(mirror), *args], capture_output=True,
                          check=True).stdout.decode()


def record(mirror: Path, pr: str) -> dict[str, str]:
    commit = git(mirror, "log", "-1", "--format=%H", "--extended-regexp",
                 f"--grep=\\(#{pr}\\)$", "HEAD").strip()
    if not commit:
        raise SystemExit(f"no commit for pull request #{pr} in {mirror}")
    base = git(mirror, "rev-parse", f"{commit}^").strip()
    diff = ["diff", "--no-color", "--no-renames", base, commit, "--"]
    f2p, p2p = LISTS[pr]
    return {"repo": "google/gson", "instance_id": f"google__gson-{pr}", "base_commit": base,
            "patch": git(mirror, *diff, ".", ":(exclude)*/src/test/*"),
            "test_patch": git(mirror, *diff, "*/src/test/*"),
            "problem_statement": git(mirror, "log", "-1", "--format=%B", commit),
            "hints_text": "",
            "created_at": git(mirror, "log", "-1", "--format=%aI", commit).strip(),
            "version": pr, "FAIL_TO_PASS": json.dumps(f2p), "PASS_TO_PASS": json.dumps(p2p)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mirror", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("prs", nargs="+", choices=sorted(LISTS))
    parser.add_argument("--refused", action="store_true")
    args = parser.parse_args()
    rows: list[dict[str, str]] = [record(args.mirror, pr) for pr in args.prs]
    if args.refused:
        rows += [{"repo": repo, "instance_id": f"{repo.replace('/', '__')}-{v}",
                  "base_commit": "0" * 40, "patch": "", "test_patch": "",
                  "problem_statement": "", "version": v, "FAIL_TO_PASS": "[]",
                  "PASS_TO_PASS": "[]"} for repo, v in REFUSED]
    args.out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"wrote {len(rows)} records to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
