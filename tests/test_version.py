"""The version records carry names the checkout that produced them."""

from __future__ import annotations

import subprocess
from pathlib import Path

from repogym.envs.record import versions
from repogym.version import __version__, checkout_version, describe


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t",
                           *args], capture_output=True, text=True, check=True).stdout.strip()


def test_a_checkout_is_named_by_its_commit_and_whether_it_was_changed(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q")
    (root / "a.py").write_text("x = 1\n")
    _git(root, "add", "a.py")
    _git(root, "commit", "-qm", "one")
    commit = _git(root, "rev-parse", "HEAD")
    assert checkout_version(root) == f"{__version__}+g{commit[:12]}"
    (root / "new.py").write_text("")  # untracked: not a change to the checkout's code
    assert checkout_version(root) == f"{__version__}+g{commit[:12]}"
    (root / "a.py").write_text("x = 2\n")
    assert checkout_version(root) == f"{__version__}+g{commit[:12]}.dirty"


def test_outside_a_checkout_the_version_is_the_packages(tmp_path: Path) -> None:
    assert checkout_version(tmp_path) == __version__  # no repository
    _git(tmp_path, "init", "-q")
    (tmp_path / "site-packages").mkdir()
    # installed inside another repository's tree: that repository's commit names nothing
    assert checkout_version(tmp_path / "site-packages") == __version__


def test_records_carry_the_described_version() -> None:
    assert versions(engine=False)["repogym"] == describe()
    assert describe().startswith(__version__)
