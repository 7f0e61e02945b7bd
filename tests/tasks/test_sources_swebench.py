"""SWE-bench instances: parsing as published, specs, test directives, mirrors."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from repogym.errors import TaskError
from repogym.tasks.schema import Task
from repogym.tasks.sources.common import Rejected
from repogym.tasks.sources.swebench import (
    default_parser,
    find_mirror,
    get_test_directives,
    load_instances,
    load_specs,
    to_task,
)

TEST_PATCH = """\
diff --git a/tests/test_app.py b/tests/test_app.py
--- a/tests/test_app.py
+++ b/tests/test_app.py
@@ -1 +1,2 @@
 x = 1
+y = 2
diff --git a/tests/data/expected.json b/tests/data/expected.json
new file mode 100644
"""


def make_mirror(root: Path) -> str:
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "app.py").write_text("x = 1\n")
    git = ["git", "-c", "user.name=a", "-c", "user.email=a@b"]
    subprocess.run(git + ["add", "-A"], cwd=root, check=True)
    subprocess.run(git + ["commit", "-qm", "base"], cwd=root, check=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                          text=True, check=True).stdout.strip()


def instance(base: str, **changes: object) -> dict[str, object]:
    row: dict[str, object] = {
        "repo": "octo/app", "instance_id": "octo__app-7", "base_commit": base,
        "patch": "diff --git a/app.py b/app.py\n", "test_patch": TEST_PATCH,
        "problem_statement": "app breaks", "hints_text": "", "created_at": "2024-01-01",
        "version": "1.0", "FAIL_TO_PASS": json.dumps(["tests/test_app.py::test_y"]),
        "PASS_TO_PASS": json.dumps(["tests/test_app.py::test_x"]),
        "environment_setup_commit": base,
    }
    row.update(changes)
    return row


@pytest.fixture()
def layout(tmp_path: Path) -> tuple[Path, Path, str]:
    repos = tmp_path / "repos"
    base = make_mirror(repos / "octo__app")
    specs = tmp_path / "specs.yaml"
    specs.write_text('octo/app:\n  "1.0":\n    python: "3.11"\n    setup: pip install -e .\n'
                     '    test_cmd: pytest -rA\n  "*":\n    python: "3.9"\n'
                     '    test_cmd: pytest -x\n')
    return repos, specs, base


def test_instances_load_from_json_list_object_and_lines(tmp_path: Path) -> None:
    rows = [instance("a" * 40), instance("b" * 40, instance_id="octo__app-8")]
    listed, lines, single = tmp_path / "l.json", tmp_path / "i.jsonl", tmp_path / "one.json"
    listed.write_text(json.dumps(rows))
    lines.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    single.write_text(json.dumps(rows[0]))
    assert load_instances(listed) == rows == load_instances(lines)
    assert load_instances(single) == rows[:1]
    broken = tmp_path / "bad.jsonl"
    broken.write_text(json.dumps(rows[0]) + "\n{oops\n")
    with pytest.raises(TaskError, match="bad.jsonl:2"):
        load_instances(broken)


def test_instance_becomes_a_task_with_lists_parsed(layout: tuple[Path, Path, str]) -> None:
    repos, specs_file, base = layout
    task = to_task(instance(base), load_specs(specs_file), repos, "eval")
    assert isinstance(task, Task)
    assert task.FAIL_TO_PASS == ("tests/test_app.py::test_y",)
    assert task.PASS_TO_PASS == ("tests/test_app.py::test_x",)
    assert task.source == str(repos / "octo__app") and task.kind == "swe"
    assert task.environment.setup == ("pip install -e .",)
    assert task.environment.test_cmd == "pytest -rA"
    assert task.environment.log_parser == "parse_log_pytest"
    assert task.environment.test_files == ("tests/test_app.py",)  # .json is not a test
    assert task.extra["environment_setup_commit"] == base
    other = to_task(instance(base, version="2.0"), load_specs(specs_file), repos, "train")
    assert isinstance(other, Task) and other.environment.python == "3.9"
    assert other.split == "train" and other.version == "2.0"


def test_unusable_instances_say_why(layout: tuple[Path, Path, str]) -> None:
    repos, specs_file, base = layout
    specs = load_specs(specs_file)
    missing = to_task(instance(base, repo="octo/other"), specs, repos, "eval")
    assert isinstance(missing, Rejected) and "no environment spec" in missing.reason
    specs["octo/other"] = {"*": {}}
    assert "no mirror" in to_task(instance(base, repo="octo/other"), specs, repos,
                                  "eval").reason  # type: ignore[union-attr]
    gone = to_task(instance("f" * 40), specs, repos, "eval")
    assert isinstance(gone, Rejected) and gone.reason.startswith("base commit missing")
    old = to_task(instance(base), {"octo/app": {"1.0": {"python": "3.6"}}}, repos, "eval")
    assert isinstance(old, Rejected) and "3.6" in old.reason


def test_specs_reject_unknown_keys(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("a/b:\n  '1':\n    install: x\n")
    with pytest.raises(TaskError, match="install"):
        load_specs(path)


def test_directives_follow_the_official_harness() -> None:
    patch = ("diff --git a/tests/forms_tests/test_media.py b/tests/forms_tests/test_media.py\n"
             "diff --git a/tests/forms_tests/templates/x.html b/tests/forms_tests/templates/"
             "x.html\n")
    assert get_test_directives(patch, "django/django") == ["forms_tests.test_media",
                                                       "forms_tests.templates.x.html"]
    assert get_test_directives(TEST_PATCH, "pallets/flask") == ["tests/test_app.py"]


def test_default_parsers_are_registry_names() -> None:
    assert default_parser("django/django") == "parse_log_django"
    assert default_parser("sympy/sympy") == "parse_log_sympy"
    assert default_parser("someone/unknown") == "parse_log_pytest"


def test_mirror_layouts(tmp_path: Path) -> None:
    (tmp_path / "a__b").mkdir()
    (tmp_path / "c" / "d.git").mkdir(parents=True)
    (tmp_path / "e__f.bundle").write_text("")
    assert find_mirror(tmp_path, "a/b") == tmp_path / "a__b"
    assert find_mirror(tmp_path, "c/d") == tmp_path / "c" / "d.git"
    assert find_mirror(tmp_path, "e/f") == tmp_path / "e__f.bundle"
    assert find_mirror(tmp_path, "x/y") is None
