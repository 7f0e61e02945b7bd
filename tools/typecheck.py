"""Type-checks the package as Python imports it: mypy on one ``repogym`` tree.

repogym's subpackages live in folders of the checkout's root (``package_dir`` in setup.cfg),
so mypy run on the checkout finds no ``repogym.envs``, ``repogym.tasks``...: with
``ignore_missing_imports`` it takes every name imported from them as ``Any``, and a call with
the wrong types across two subpackages passes. Here the package's Python files are copied into
one tree (as for the import contracts, ``lint_imports.py``), mypy checks it with the
checkout's configuration, and its messages name the checkout's files.

    .venv/bin/python tools/typecheck.py
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lint_imports import ROOT, package_dirs, stage  # noqa: E402 - a sibling script

# a fixed place, so that mypy's cache (kept there too) serves the next run
TREE = ROOT / "build" / "typecheck"


def to_checkout(line: str) -> str:
    """A message about ``repogym/envs/x.py`` as one about ``envs/x.py``."""
    for name, folder in sorted(package_dirs().items(), key=lambda item: -item[0].count(".")):
        staged = name.replace(".", "/") + "/"
        if line.startswith(staged):
            return folder.relative_to(ROOT).as_posix() + "/" + line[len(staged):]
    return line


def main() -> int:
    shutil.rmtree(TREE / "repogym", ignore_errors=True)
    TREE.mkdir(parents=True, exist_ok=True)
    stage(TREE)
    mypy = Path(sys.executable).with_name("mypy")
    proc = subprocess.run([str(mypy), "--config-file", str(ROOT / "pyproject.toml"),
                           "--cache-dir", str(TREE / ".mypy_cache"), "repogym"],
                          cwd=TREE, capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        print(to_checkout(line))
    sys.stderr.write(proc.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
