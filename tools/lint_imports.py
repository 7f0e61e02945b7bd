"""Checks the import rules of the manual's architecture page, docs/architecture.md (the
contracts under ``[tool.importlinter]`` in pyproject.toml) with import-linter.

import-linter finds a package's modules by walking its folder, and repogym's subpackages live
in folders of the checkout's root (``package_dir`` in setup.cfg): so the package's Python
files are copied into a temporary tree as one ``repogym`` folder, and the check runs on it.

    .venv/bin/python tools/lint_imports.py
"""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP = ("tasks/demo/src", "tasks/demo/langs/src", "tasks/adversarial/src",
        "tasks/adversarial/repos", "agents/attacks/payloads")


def package_dirs() -> dict[str, Path]:
    """``repogym.X``'s folder in the checkout, for every mapping of setup.cfg's package_dir."""
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    dirs = {}
    for line in config["options"]["package_dir"].strip().splitlines():
        name, _, folder = (part.strip() for part in line.partition("="))
        dirs[name] = ROOT / folder
    return dirs


def stage(dest: Path) -> None:
    for name, folder in sorted(package_dirs().items(), key=lambda item: item[0].count(".")):
        target = dest.joinpath(*name.split("."))
        for source in folder.rglob("*.py"):
            rel = source.relative_to(ROOT).as_posix()
            if any(rel.startswith(skip + "/") for skip in SKIP) or ".venv" in source.parts:
                continue
            out = target / source.relative_to(folder)
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, out)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="repogym-imports-") as tmp:
        stage(Path(tmp))
        env = {**os.environ, "PYTHONPATH": tmp}
        lint = Path(sys.executable).with_name("lint-imports")
        return subprocess.run([str(lint), str(ROOT / "pyproject.toml"),
                               "--no-cache"], env=env, cwd=tmp).returncode


if __name__ == "__main__":
    sys.exit(main())
