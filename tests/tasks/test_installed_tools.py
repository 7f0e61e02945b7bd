"""The build tools a repository imports stay in its image (Sphinx 3's `from pkg_resources
import iter_entry_points`: with setuptools pruned, every test failed to import)."""

from __future__ import annotations

from pathlib import Path

from repogym.images.installed import imported_tools


def test_what_the_code_imports_is_needed_and_setup_py_does_not_count(tmp_path: Path) -> None:
    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup()\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("X = 1\n")
    assert imported_tools(str(tmp_path)) == set()
    (tmp_path / "pkg" / "registry.py").write_text(
        "import os\nfrom pkg_resources import iter_entry_points\n")
    (tmp_path / ".tox").mkdir()
    (tmp_path / ".tox" / "x.py").write_text("import pip\n")  # hidden folders are not code
    assert imported_tools(str(tmp_path)) == {"setuptools"}
    (tmp_path / "pkg" / "wheels.py").write_text("    import wheel.bdist_wheel\n")
    assert imported_tools(str(tmp_path)) == {"setuptools", "wheel"}
