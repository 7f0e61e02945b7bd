"""A script next to a checkout folder named `repogym` (the default clone name) imports the
installed package, not the checkout as an empty namespace package."""

from __future__ import annotations

import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = """\
import gymnasium as gym
import repogym
env = gym.make("repogym/SWE-v0", suite="demo")
print(repogym.__file__, len(env.unwrapped.tasks))
env.close()
"""


def run(python: str, folder: Path) -> subprocess.CompletedProcess[str]:
    (folder / "script.py").write_text(SCRIPT)
    return subprocess.run([python, "script.py"], cwd=folder, capture_output=True, text=True,
                          timeout=120)


def test_a_script_next_to_the_checkout_gets_the_package(tmp_path: Path) -> None:
    (tmp_path / "repogym").symlink_to(ROOT)  # this checkout, as `git clone` names it
    done = run(sys.executable, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    path, n = done.stdout.split()
    assert Path(path).resolve() == ROOT / "repogym" / "__init__.py" and n == "5"


def test_a_checkout_other_than_the_installed_one_hands_over_too(tmp_path: Path) -> None:
    checkout = tmp_path / "repogym"
    (checkout / "envs").mkdir(parents=True)  # a folder the namespace package would pick up
    shutil.copy(ROOT / "__init__.py", checkout / "__init__.py")
    done = run(sys.executable, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert Path(done.stdout.split()[0]).resolve() == ROOT / "repogym" / "__init__.py"


def test_without_an_install_the_error_says_what_is_wrong(tmp_path: Path) -> None:
    venv.create(tmp_path / "venv")  # a Python without repogym
    (tmp_path / "repogym").symlink_to(ROOT)
    (tmp_path / "script.py").write_text("import repogym\n")
    done = subprocess.run([str(tmp_path / "venv" / "bin" / "python"), "script.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: ") and "is a repogym checkout" in last
    assert "repogym is not installed" in last and "pip install -e" in last
