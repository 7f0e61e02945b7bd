"""Mining a repository's history: which commits qualify, how they split, where statements
come from. The repository is built here, commit by commit."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from repogym.errors import TaskError
from repogym.repo import snapshot_commit
from repogym.schema import Task
from repogym.tasks.sources.common import Rejected, SourceOptions
from repogym.tasks.sources.detect import EnvOverrides
from repogym.tasks.sources.git import (
    GitOptions,
    GitSource,
    eligible_commits,
    issue_for,
    load_issues,
    split_commit,
)

IDENTITY = {"GIT_AUTHOR_NAME": "dev", "GIT_AUTHOR_EMAIL": "dev@example.com",
            "GIT_COMMITTER_NAME": "dev", "GIT_COMMITTER_EMAIL": "dev@example.com"}


def commit(repo: Path, message: str, files: dict[str, str | None]) -> str:
    """Writes (or, for None, deletes) files and commits them; returns the commit id."""
    for name, text in files.items():
        path = repo / name
        if text is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    env = {**os.environ, **IDENTITY}
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True, env=env)
    subprocess.run(["git", "commit", "-q", "-m", message], cwd=repo, check=True, env=env)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, check=True, env=env,
                          capture_output=True, text=True).stdout.strip()


def build_history(repo: Path) -> dict[str, str]:
    """A small project whose history has one commit of every kind."""
    subprocess.run(["git", "init", "-q", "--initial-branch=main", str(repo)], check=True)
    shas = {"root": commit(repo, "start", {
        "calc/__init__.py": "def add(a, b):\n    return a - b\n",
        "tests/test_calc.py": "from calc import add\n\n\ndef test_zero():\n"
                              "    assert add(0, 0) == 0\n",
    })}
    shas["docs"] = commit(repo, "docs only", {"README.md": "# calc\n"})
    shas["fix"] = commit(repo, "Fix add for non-zero numbers\n\nFixes #12.", {
        "calc/__init__.py": "def add(a, b):\n    return a + b\n",
        "tests/test_calc.py": "from calc import add\n\n\ndef test_zero():\n"
                              "    assert add(0, 0) == 0\n\n\ndef test_add():\n"
                              "    assert add(2, 3) == 5\n",
        "tests/data/case.json": "[2, 3, 5]\n",
        "CHANGES.md": "- fixed add\n",
    })
    shas["tests_only"] = commit(repo, "more tests", {
        "tests/test_more.py": "from calc import add\n\n\ndef test_neg():\n"
                              "    assert add(-1, -1) == -2\n",
    })
    shas["feature"] = commit(repo, "Add mul", {
        "calc/__init__.py": "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n"
                            "    return a * b\n",
        "tests/test_mul.py": "from calc import mul\n\n\ndef test_mul():\n"
                             "    assert mul(2, 3) == 6\n",
        "tests/test_more.py": None,
    })
    return shas


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    repo = tmp_path_factory.mktemp("hist") / "calc"
    return repo, build_history(repo)


def test_only_commits_with_code_and_tests_qualify(history: tuple[Path, dict[str, str]]) -> None:
    repo, shas = history
    found = eligible_commits(repo)
    assert [c.sha for c in found] == [shas["feature"], shas["fix"]]  # newest first
    fix = found[1]
    assert fix.parent == shas["docs"]
    assert set(fix.files) == {"calc/__init__.py", "tests/test_calc.py", "tests/data/case.json",
                              "CHANGES.md"}
    assert eligible_commits(repo, max_files=3) == [found[0]]


def test_a_commit_splits_into_patch_and_test_patch(history: tuple[Path, dict[str, str]]) -> None:
    repo, shas = history
    fix = next(c for c in eligible_commits(repo) if c.sha == shas["fix"])
    patch, test_patch = split_commit(repo, fix)
    assert "diff --git a/calc/__init__.py" in patch and "diff --git a/CHANGES.md" in patch
    assert "tests/" not in patch
    assert "diff --git a/tests/test_calc.py" in test_patch
    assert "diff --git a/tests/data/case.json" in test_patch
    assert "calc/__init__.py" not in test_patch
    feature = next(c for c in eligible_commits(repo) if c.sha == shas["feature"])
    assert "deleted file mode" in split_commit(repo, feature)[1]


def test_candidates_from_history(history: tuple[Path, dict[str, str]]) -> None:
    repo, shas = history
    source = GitSource(GitOptions(repo), SourceOptions(seed=1), log=lambda _m: None)
    tasks = list(source.candidates())
    again = list(GitSource(GitOptions(repo), SourceOptions(seed=1)).candidates())
    assert [t.to_dict() for t in tasks] == [t.to_dict() for t in again]
    task = next(t for t in tasks if t.extra["commit"] == shas["fix"])
    assert task.instance_id == f"calc-{shas['fix'][:12]}"
    assert task.base_commit == shas["docs"] and task.source == str(repo.resolve())
    assert task.problem_statement == "Fix add for non-zero numbers\n\nFixes #12."
    assert task.kind == "swe" and task.split == "eval"
    assert task.environment.test_cmd == "python -m pytest -rA"
    assert task.created_at and task.created_at[:4].isdigit()


def test_the_base_snapshot_does_not_hold_the_fix(history: tuple[Path, dict[str, str]],
                                                 tmp_path: Path) -> None:
    repo, shas = history
    source = GitSource(GitOptions(repo), SourceOptions(), log=lambda _m: None)
    task = next(t for t in source.candidates() if t.extra["commit"] == shas["fix"])
    from repogym.repo import export_tree, snapshot

    tree = tmp_path / "base"
    export_tree(task.source or "", task.base_commit, tree)
    snapshot(tree)
    assert "a - b" in (tree / "calc" / "__init__.py").read_text()
    log = subprocess.run(["git", "log", "--all", "--format=%H"], cwd=tree, capture_output=True,
                         text=True, check=True).stdout.split()
    assert log == [snapshot_commit(repo, task.base_commit)]
    assert shas["fix"] not in log


def test_issue_texts_replace_commit_messages(history: tuple[Path, dict[str, str]],
                                             tmp_path: Path) -> None:
    repo, shas = history
    issues = tmp_path / "issues"
    issues.mkdir()
    (issues / "12.md").write_text("add(2, 3) returns -1\n")
    source = GitSource(GitOptions(repo, issues=issues), SourceOptions(), log=lambda _m: None)
    task = next(t for t in source.candidates() if t.extra["commit"] == shas["fix"])
    assert task.problem_statement == "add(2, 3) returns -1\n"
    assert task.extra["statement_from"] == "issue"
    mapping = tmp_path / "issues.json"
    mapping.write_text(json.dumps({shas["feature"][:10]: "we need mul"}))
    loaded = load_issues(mapping)
    assert issue_for(loaded, shas["feature"], "Add mul") == "we need mul"
    assert issue_for(loaded, shas["fix"], "no reference") is None


def test_oversized_and_empty_candidates_are_rejected_before_running(
        history: tuple[Path, dict[str, str]]) -> None:
    repo, _ = history

    def never(task: Task) -> tuple[Task | None, str]:
        raise AssertionError("a rejected candidate must not run")

    source = GitSource(GitOptions(repo, max_lines=5), SourceOptions(), derive=never,
                       log=lambda _m: None)
    task = next(iter(source.candidates()))
    done, reason = source.check(task)
    assert done is None and reason.startswith("patch too large")
    done, reason = source.check(task.with_(patch="", test_patch="x\n"))
    assert done is None and reason.startswith("empty patch")


def test_a_folder_without_history_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match="not a git repository"):
        GitSource(GitOptions(tmp_path), SourceOptions())


def test_pre_module_go_commits_are_rejected_with_a_reason(tmp_path: Path) -> None:
    """Go from before ``go.mod`` cannot be built offline: such a commit is a rejected
    candidate (counted, with its reason) and no image is built for it."""
    repo = tmp_path / "clamp"
    subprocess.run(["git", "init", "-q", "--initial-branch=main", str(repo)], check=True)
    code = "package clamp\n\nfunc Clamp(x, lo int) int {\n\tif x < lo {\n\t\treturn lo\n\t}\n"
    test = "package clamp\n\nimport \"testing\"\n\nfunc TestBelow(t *testing.T) {}\n"
    commit(repo, "start", {"clamp.go": code + "\treturn x\n}\n", "clamp_test.go": test})
    old = commit(repo, "fix before modules", {"clamp.go": code + "\treturn x + 0\n}\n",
                                             "clamp_test.go": test + "\n// more\n"})
    commit(repo, "modules", {"go.mod": "module example.com/clamp\n\ngo 1.21\n"})
    new = commit(repo, "fix after", {"clamp.go": code + "\treturn x\n}\n",
                                     "clamp_test.go": test + "\n// again\n"})
    found = {(c.instance_id.rsplit("-", 1)[1], type(c).__name__): c
             for c in GitSource(GitOptions(repo), SourceOptions()).candidates()}
    assert set(found) == {(old[:12], "Rejected"), (new[:12], "Task")}
    rejected = found[(old[:12], "Rejected")]
    assert isinstance(rejected, Rejected) and rejected.reason.startswith("pre-module Go: no go.mod")
    # the user's own setup says how to build it: then it is a candidate like any other
    source = GitSource(GitOptions(repo), SourceOptions(),
                       overrides=EnvOverrides(setup=("go mod init example.com/clamp",)))
    assert all(isinstance(c, Task) for c in source.candidates())


def test_a_source_that_lacks_objects_of_its_commit_says_so(tmp_path: Path) -> None:
    """astropy__astropy-14182: the mirror lacked a large data file's blob, `git archive` failed
    and its CalledProcessError ended a whole Lite run. It is a rejection that names the source,
    the commit and what to do."""
    from repogym.errors import SourceIncomplete
    from repogym.repo import export_tree
    from repogym.tasks.sources.common import reason_kind
    from repogym.tasks.validate import error_reason

    repo = tmp_path / "mirror"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "data.bin").write_text("a large table\n")
    git = ["git", "-c", "user.name=a", "-c", "user.email=a@b"]
    subprocess.run([*git, "add", "-A"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "x"], cwd=repo, check=True)
    blob = subprocess.run(["git", "rev-parse", "HEAD:data.bin"], cwd=repo, capture_output=True,
                          text=True, check=True).stdout.strip()
    (repo / ".git" / "objects" / blob[:2] / blob[2:]).unlink()  # left out, as a mirror may
    with pytest.raises(SourceIncomplete) as caught:
        export_tree(repo, "HEAD", tmp_path / "out")
    reason = error_reason(caught.value)
    assert reason.startswith("source incomplete: ") and "git fetch" in reason, reason
    assert reason_kind(reason) == "source incomplete"


def test_what_a_commit_imports_that_its_snapshot_lacks_is_installed_on_a_guess(
        tmp_path: Path) -> None:
    """isodate's history: a commit's two new test modules import six, which the fix adds to
    install_requires; the snapshot's environment lacked it, the gold could not pass."""
    repo = tmp_path / "dates"
    subprocess.run(["git", "init", "-q", "--initial-branch=main", str(repo)], check=True)
    commit(repo, "start", {
        "setup.py": "from setuptools import setup\nsetup(name='dates', packages=['dates'])\n",
        "dates/__init__.py": "def parse(text):\n    return text\n",
        "tests/test_parse.py": "import yaml\nfrom dates import parse\n\n\ndef test_same():\n"
                               "    assert parse('a') == 'a'\n",
    })
    commit(repo, "Parse bytes", {
        "setup.py": "from setuptools import setup\nsetup(name='dates', packages=['dates'], "
                    "install_requires=['six'])\n",
        "dates/__init__.py": "import six\nimport attr\nfrom dates.text import norm\n\n\n"
                             "def parse(text):\n    return six.ensure_str(norm(text))\n",
        "dates/text.py": "def norm(text):\n    return text\n",
        "tests/test_bytes.py": "import six\nimport yaml\nfrom dates import parse\n\n\n"
                               "def test_bytes():\n    assert parse(six.b('a')) == 'a'\n",
    })
    (task,) = GitSource(GitOptions(repo), SourceOptions(), log=lambda _m: None).candidates()
    assert isinstance(task, Task)
    setup = task.environment.setup
    # the snapshot's own guess (yaml, imported before), then what the change imports, then
    # the harness's pytest last; the package's own new module is no distribution
    assert setup[0] == "python -m pip install -e ."
    assert "PyYAML" in setup[1] and "imported by the tests" in setup[1]
    assert setup[2] == ('for p in attrs six; do python -m pip install -q "$p" || echo '
                        '"repogym: $p (imported by the change) did not install"; done')
    assert setup[3] == "python -m pip install 'pytest>=4.6'"
    overridden = GitSource(GitOptions(repo), SourceOptions(), EnvOverrides(setup=("true",)),
                           log=lambda _m: None)
    (plain,) = overridden.candidates()
    assert isinstance(plain, Task) and plain.environment.setup == ("true",)
