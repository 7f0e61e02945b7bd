"""The package as a user gets it: the wheel builds without setuptools' package-data warnings,
carries the suites' data and every module of the package; every module imports, and every
import of a repogym module anywhere in the code (inside functions too) names one that exists;
the wheel installed in a fresh virtual environment runs a demo episode."""

from __future__ import annotations

import ast
import configparser
import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# folders of repositories and data inside the packages (setup.py's DATA): no modules of repogym
DATA = ("tasks/demo/", "tasks/adversarial/", "tasks/data/", "agents/attacks/payloads/")


def package_dirs() -> dict[str, str]:
    """``repogym.X`` -> its folder, from setup.cfg's package_dir."""
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    out = {}
    for line in config["options"]["package_dir"].strip().splitlines():
        name, _, folder = (part.strip() for part in line.partition("="))
        out[name] = folder
    return out


def package_modules() -> dict[str, str]:
    """Every module of the package (tracked Python files of the mapped folders) -> its file."""
    tracked = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
    modules = {}
    for name, folder in package_dirs().items():
        prefix = "" if folder == "." else folder.rstrip("/") + "/"
        for path in tracked:
            if not path.startswith(prefix) or path.startswith(DATA):
                continue
            inner = path[len(prefix):-3].split("/")
            if any(other != folder and path.startswith(other + "/")
                   for other in package_dirs().values()):
                continue  # another mapping's folder
            if inner[-1] == "__init__":
                inner = inner[:-1]
            modules[".".join([name, *inner])] = path
    return modules


def clean_copy(dest: Path) -> Path:
    """The checkout's files (tracked, and new ones git does not ignore) copied to ``dest``:
    setuptools builds in the source folder, and a ``build/`` left there by an earlier build
    would put its modules into the wheel whatever the configuration says."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                            "--exclude-standard"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """The wheel built from a clean copy of this checkout, and pip's output."""
    out = tmp_path_factory.mktemp("wheel")
    source = clean_copy(tmp_path_factory.mktemp("source"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                           "--no-build-isolation", "-w", str(out), str(source)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    [path] = out.glob("repogym-*.whl")
    yield path, done.stdout + done.stderr


@pytest.mark.slow
def test_wheel_is_quiet_and_holds_the_suites(wheel: tuple[Path, str]) -> None:
    path, output = wheel
    assert "is absent from the `packages` configuration" not in output
    names = set(zipfile.ZipFile(path).namelist())
    tracked = subprocess.run(["git", "ls-files", "tasks/demo/src", "tasks/demo/defs",
                              "tasks/demo/tasks.jsonl", "tasks/adversarial/tasks.jsonl",
                              "tasks/data"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    assert len(tracked) > 50
    missing = [p for p in tracked if f"repogym/{p}" not in names]
    assert not missing, missing
    assert "repogym/py.typed" in names and not any("__pycache__" in n for n in names)


# tracked files of the package's folders that are not part of an install, on purpose
NOT_SHIPPED = {"agents/ppo/README.md", "tasks/demo/README.md", "tasks/demo/build.py",
               "tasks/demo/langs/build.py"}


@pytest.mark.slow
def test_the_wheel_holds_every_file_of_the_package_folders(wheel: tuple[Path, str]) -> None:
    """Scripts read as resources, attack payloads, the demo repositories' dot files: a file an
    editable install finds in the checkout must be in the wheel too (the demo-langs
    repositories' .gitignore files were not: setup.cfg's ``**/*`` matches no dot file)."""
    names = set(zipfile.ZipFile(wheel[0]).namelist())
    folders = sorted(set(package_dirs().values()))
    tracked = subprocess.run(["git", "ls-files", "--", *folders], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
    assert len(tracked) > 300

    def in_wheel(path: str) -> str:
        top, rest = path.split("/", 1)
        return f"repogym/{rest}" if top == "repogym" else f"repogym/{path}"

    missing = [p for p in tracked if in_wheel(p) not in names and p not in NOT_SHIPPED]
    assert not missing, missing


@pytest.mark.slow
def test_the_wheel_holds_every_module_of_the_package(wheel: tuple[Path, str]) -> None:
    """setup.cfg listed the packages by hand and the wheel lacked repogym.envs.backends and
    repogym.envs.grading.runners: a plain `pip install` could not make an environment."""
    names = set(zipfile.ZipFile(wheel[0]).namelist())
    modules = package_modules()
    assert "repogym.envs.grading.runners.language" in modules and len(modules) > 200
    missing = sorted(m for m in modules
                     if f"{m.replace('.', '/')}.py" not in names
                     and f"{m.replace('.', '/')}/__init__.py" not in names)
    assert not missing, missing


def _imports(path: Path, module: str) -> Iterator[tuple[str, str | None, int]]:
    """(module, name or None, line) of every import of a repogym module in the file, at any
    depth (an import inside a function runs only when the function does)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "repogym":
                    yield alias.name, None, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = importlib.util.resolve_name("." * node.level + base, package)
            if base.split(".")[0] == "repogym":
                for alias in node.names:
                    yield base, alias.name, node.lineno


def test_every_module_imports_and_every_repogym_import_resolves() -> None:
    """`tasks add --ray` failed at once: tasks/ray_checking.py imported, inside a function,
    repogym.agents.ray_runner, which had moved to agents/evaluation/. Nothing imported it
    before a user did."""
    modules = package_modules()
    broken = []
    for module in sorted(modules):
        if module.endswith(".__main__"):
            continue  # runs the command line
        try:
            importlib.import_module(module)
        except Exception as exc:  # every module must import in the dev environment
            broken.append(f"{module}: {type(exc).__name__}: {exc}")
    assert not broken, broken
    for module, path in sorted(modules.items()):
        for target, name, line in _imports(ROOT / path, module):
            where = f"{path}:{line}"
            if importlib.util.find_spec(target) is None:
                broken.append(f"{where}: no module {target}")
            elif name is not None and name != "*" and not hasattr(
                    importlib.import_module(target), name) and importlib.util.find_spec(
                    f"{target}.{name}") is None:
                broken.append(f"{where}: {target} has no {name}")
    assert not broken, broken


@pytest.mark.docker
@pytest.mark.slow
def test_the_wheel_in_a_fresh_venv_runs_a_demo_episode(tmp_path: Path) -> None:
    """tools/wheel_check.sh: build, install (not editable) into a new virtual environment,
    and run the gold agent on one demo task from a folder outside the checkout."""
    env = {**os.environ, "BUILDER": sys.executable}
    done = subprocess.run([str(ROOT / "tools" / "wheel_check.sh"), str(tmp_path / "work")],
                          capture_output=True, text=True, timeout=1800, env=env)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert "resolved by the gold agent" in done.stdout
