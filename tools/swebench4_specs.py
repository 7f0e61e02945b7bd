#!/usr/bin/env python3
"""Writes tasks/data/swebench4_specs.json: the environment specs published with swebench 4.x.

Kept: the Python specs, and those of SWE-bench Multilingual's JavaScript, Go, Rust and Java
repositories (``language_specs``, with each one's language and swebench's log parser by name);
the other languages' repositories (C, PHP, Ruby: no toolchain image here) are only named.

swebench 5 keeps a spec inside each task (image, eval script, log parser) and no longer ships
``MAP_REPO_VERSION_TO_SPECS``; the SWE-bench files published before it (Lite, Verified, full,
SWE-Gym) carry only ``repo`` and ``version``. This script reads the specs from the swebench 4
wheel itself (downloaded with pip, unpacked, its constants imported in a child process, so the
installed swebench 5 is never shadowed) and writes them as data, offline from then on.

    python tools/swebench4_specs.py                 # swebench==4.1.0, the file in the package
    python tools/swebench4_specs.py --version 4.0.4 --out /tmp/specs.json
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "tasks" / "data" / "swebench4_specs.json"

# Runs in the child, with the unpacked wheel first on sys.path (the package's __init__ imports
# its harness, whose dependencies swebench 5 shares).
DUMP = """
import json, sys
sys.path.insert(0, sys.argv[1])
from swebench.harness.constants import python as py
from swebench.harness import constants as all_constants
from swebench.harness.log_parsers import MAP_REPO_TO_PARSER
kept = {"js": "javascript", "go": "go", "rs": "rust", "java": "java"}
language = {repo: kept[ext] for repo, ext in all_constants.MAP_REPO_TO_EXT.items() if ext in kept}
others = sorted(set(all_constants.MAP_REPO_VERSION_TO_SPECS) - set(py.MAP_REPO_VERSION_TO_SPECS_PY)
                - set(language))
json.dump({
    "language_specs": {repo: all_constants.MAP_REPO_VERSION_TO_SPECS[repo] for repo in language},
    "language_of": language,
    "language_parsers": {repo: MAP_REPO_TO_PARSER[repo].__name__ for repo in language},
    "specs": py.MAP_REPO_VERSION_TO_SPECS_PY,
    "reqs_paths": py.MAP_REPO_TO_REQS_PATHS,
    "env_yml_paths": py.MAP_REPO_TO_ENV_YML_PATHS,
    "install": py.MAP_REPO_TO_INSTALL_PY,
    "non_test_exts": all_constants.NON_TEST_EXTS,
    "other_language_repos": others,
}, sys.stdout, sort_keys=True)
"""


def download(version: str, folder: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                    "--only-binary=:all:", f"swebench=={version}", "-d", str(folder)], check=True)
    return next(folder.glob(f"swebench-{version}-*.whl"))


def replace_req_packages(source: str) -> list[list[str | None]]:
    """``REPLACE_REQ_PACKAGES`` of test_spec/python.py, read without importing it (it needs
    requests and fetches from the network when used)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "REPLACE_REQ_PACKAGES" for t in node.targets):
            return [list(pair) for pair in ast.literal_eval(node.value)]
    return []


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", default="4.1.0", help="the swebench 4.x release to read")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="swebench4-") as tmp:
        wheel = download(args.version, Path(tmp))
        unpacked = Path(tmp) / "wheel"
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(unpacked)
        proc = subprocess.run([sys.executable, "-I", "-c", DUMP, str(unpacked)],
                              capture_output=True, text=True)
        if proc.returncode:  # run it with the project's venv: the harness imports its deps
            raise SystemExit(f"reading swebench {args.version}'s constants failed:\n"
                             f"{proc.stderr[-3000:]}")
        data = json.loads(proc.stdout)
        test_spec = unpacked / "swebench" / "harness" / "test_spec" / "python.py"
        data["replace_req_packages"] = replace_req_packages(test_spec.read_text())
    data["swebench"] = args.version
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"wrote {args.out}: {sum(len(v) for v in data['specs'].values())} Python specs of "
          f"{len(data['specs'])} repositories, "
          f"{sum(len(v) for v in data['language_specs'].values())} specs of "
          f"{len(data['language_specs'])} JavaScript, Go, Rust and Java repositories "
          f"(swebench {args.version})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
