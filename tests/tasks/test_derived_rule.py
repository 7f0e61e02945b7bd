"""Which tasks get a thin image (repogym.images.derived.derivable): a change to .py files
other than setup.py, made on a snapshot the task's source holds."""

from __future__ import annotations

from pathlib import Path

from repogym.images import derived
from repogym.repo import git
from repogym.schema import Environment, Task


def commit(repo: Path, files: dict[str, str]) -> str:
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "c")
    return git(repo, "rev-parse", "HEAD").strip()


def test_only_a_change_to_python_files_other_than_setup_py_is_derived(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q")
    head = commit(repo, {"pkg/a.py": "x = 1\n", "setup.py": "", "README": "r\n"})

    def task(files: dict[str, str], **kw: object) -> Task:
        git(repo, "checkout", "-q", head)
        base = commit(repo, files)
        return Task(instance_id="t", repo="r", base_commit=base, problem_statement="",
                    patch="", source=str(repo), extra={"original_commit": head}, **kw)

    assert derived.derivable(task({"pkg/a.py": "x = 2\n", "pkg/b.py": ""}))
    assert not derived.derivable(task({"pkg/a.py": "x = 3\n", "setup.py": "#\n"}))
    assert not derived.derivable(task({"README": "changed\n"}))
    assert not derived.derivable(task({"pkg/a.py": "x = 4\n"},
                                      environment=Environment(image="their/own:1")))
    no_source = task({"pkg/a.py": "x = 5\n"}).with_(source=None)
    assert not derived.derivable(no_source)
    unknown = task({"pkg/a.py": "x = 6\n"}).with_(base_commit="f" * 40)
    assert not derived.derivable(unknown)  # a commit the source lacks: built from scratch
