"""SWE-bench instances: parsing as published, environments from the harness's specs, mirrors."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from repogym.errors import TaskError
from repogym.schema import Task
from repogym.tasks.sources import mirrors
from repogym.tasks.sources.common import Rejected, SourceOptions
from repogym.tasks.sources.datasets import load_rows
from repogym.tasks.sources.mirrors import Mirrors, find_mirror
from repogym.tasks.sources.swebench import (
    SwebenchOptions,
    SwebenchSource,
    default_parser,
    get_test_directives,
    load_specs,
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
GIT = ["git", "-c", "user.name=a", "-c", "user.email=a@b"]


def commit_all(root: Path, message: str = "base") -> str:
    subprocess.run(GIT + ["add", "-A"], cwd=root, check=True)
    subprocess.run(GIT + ["commit", "-qm", message], cwd=root, check=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                          text=True, check=True).stdout.strip()


def make_mirror(root: Path) -> str:
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "app.py").write_text("x = 1\n")
    (root / "requirements").mkdir()
    (root / "requirements" / "dev.txt").write_text("-e .\n# pinned\n-r tests.txt\nblack==22.1\n")
    (root / "requirements" / "tests.txt").write_text("pytest==7.1.2\ntypes-pkg_resources==0.1\n")
    return commit_all(root)


def instance(base: str, **changes: object) -> dict[str, object]:
    row: dict[str, object] = {
        "repo": "pallets/flask", "instance_id": "pallets__flask-7", "base_commit": base,
        "patch": "diff --git a/app.py b/app.py\n", "test_patch": TEST_PATCH,
        "problem_statement": "app breaks", "hints_text": "", "created_at": "2024-01-01",
        "version": "2.0", "FAIL_TO_PASS": json.dumps(["tests/test_app.py::test_y"]),
        "PASS_TO_PASS": json.dumps(["tests/test_app.py::test_x"]),
        "environment_setup_commit": base,
    }
    row.update(changes)
    return row


def source(tmp_path: Path, rows: list[dict[str, Any]], env: Path | None = None,
           repos: Path | None = None) -> SwebenchSource:
    file = tmp_path / "instances.jsonl"
    file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    options = SwebenchOptions(file, repos or tmp_path / "repos", env, validate=False, clone=False)
    return SwebenchSource(options, SourceOptions())


@pytest.fixture()
def repos(tmp_path: Path) -> tuple[Path, str]:
    return tmp_path / "repos", make_mirror(tmp_path / "repos" / "pallets__flask")


def test_instances_load_from_json_list_object_and_lines(tmp_path: Path) -> None:
    rows = [instance("a" * 40), instance("b" * 40, instance_id="pallets__flask-8")]
    listed, lines, single = tmp_path / "l.json", tmp_path / "i.jsonl", tmp_path / "one.json"
    listed.write_text(json.dumps(rows))
    lines.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    single.write_text(json.dumps(rows[0]))
    assert load_rows(listed) == rows == load_rows(lines)
    assert load_rows(single) == rows[:1]
    broken = tmp_path / "bad.jsonl"
    broken.write_text(json.dumps(rows[0]) + "\n{oops\n")
    with pytest.raises(TaskError, match="bad.jsonl:2"):
        load_rows(broken)


def test_published_specs_give_the_environment(tmp_path: Path, repos: tuple[Path, str]) -> None:
    """No --env: flask 2.0's spec from swebench 4.1.0, requirements read from the mirror."""
    folder, base = repos
    task = next(source(tmp_path, [instance(base)], repos=folder).candidates())
    assert isinstance(task, Task)
    assert task.FAIL_TO_PASS == ("tests/test_app.py::test_y",)
    env = task.environment
    assert env.python == "3.9" and env.test_cmd == "pytest -rA"
    assert env.log_parser == "parse_log_flask"
    assert env.test_files == ("tests/test_app.py",)  # .json is not a test
    # requirements/dev.txt as the harness reads it: -r inlined, "-e ." and comments dropped,
    # the yanked package replaced
    written = subprocess.run(["bash", "-c", env.env_setup[2].replace(
        "/tmp/repogym-requirements.txt", "/dev/stdout")], capture_output=True, text=True).stdout
    assert written.split() == ["pytest==7.1.2", "types-setuptools", "black==22.1"]
    assert env.env_setup[3] == "python -m pip install -r /tmp/repogym-requirements.txt"
    assert env.env_setup[4].startswith("python -m pip install setuptools==70.0.0 Werkzeug==2.3.7")
    # the packages make the environment image; the install is the task's, pre-run there at
    # the environment setup commit
    assert env.setup == ("python -m pip install -e .",) and env.env_commit == base
    assert task.extra["environment_source"]["from"] == "swebench 4.1.0 specs (pallets/flask 2.0)"
    assert task.source == str(folder / "pallets__flask")


def test_listed_ids_that_name_no_test_are_dropped(tmp_path: Path,
                                                 repos: tuple[Path, str]) -> None:
    # pytest-dev__pytest-5227's PASS_TO_PASS holds lines of a test's captured output
    folder, base = repos
    junk = ["[100%]", "[", "[100%]------------------------------"]
    row = instance(base, PASS_TO_PASS=json.dumps(["tests/test_app.py::test_x", *junk]))
    task = next(source(tmp_path, [row], repos=folder).candidates())
    assert isinstance(task, Task)
    assert task.PASS_TO_PASS == ("tests/test_app.py::test_x",)
    assert sorted(task.extra["dropped_tests"]) == sorted(junk)
    assert "not a test id" in task.extra["dropped_tests"]["["]


def test_env_file_only_overrides(tmp_path: Path, repos: tuple[Path, str]) -> None:
    folder, base = repos
    specs = tmp_path / "specs.yaml"
    specs.write_text('pallets/flask:\n  "2.0":\n    python: "3.11"\n    setup: pip install -e .\n')
    src = source(tmp_path, [instance(base), instance(base, version="2.3",
                                                     instance_id="pallets__flask-8")],
                 env=specs, repos=folder)
    first, second = list(src.candidates())
    assert isinstance(first, Task) and isinstance(second, Task)
    assert first.environment.python == "3.11" and first.environment.setup == ("pip install -e .",)
    assert second.environment.python == "3.11"  # flask 2.3's own spec
    assert second.extra["environment_source"]["from"].startswith("swebench 4.1.0 specs")


def test_unusable_instances_say_why(tmp_path: Path, repos: tuple[Path, str]) -> None:
    folder, base = repos
    rows = [instance(base, repo="octo/other", instance_id="octo__other-1"),
            instance("f" * 40, instance_id="pallets__flask-9"),
            instance(base, repo="django/django", instance_id="django__django-1", version="9.9")]
    (folder / "django__django").mkdir()
    subprocess.run(["git", "init", "-q", "--bare", str(folder / "django__django")], check=True)
    got = list(source(tmp_path, rows, repos=folder).candidates())
    assert all(isinstance(c, Rejected) for c in got)
    reasons = [c.reason for c in got]  # type: ignore[union-attr]
    assert reasons[0].startswith("no mirror: put octo/other at")
    assert reasons[1].startswith("base commit missing")
    assert reasons[2].startswith("base commit missing")


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
    assert default_parser("psf/requests") == "parse_log_requests"
    assert default_parser("someone/unknown") == "parse_log_pytest"


def test_mirror_layouts(tmp_path: Path) -> None:
    for path in (tmp_path / "a__b", tmp_path / "c" / "d.git", tmp_path / "g+h" / "repo"):
        subprocess.run(["git", "init", "-q", "--bare", str(path)], check=True)
    (tmp_path / "e__f.bundle").write_text("")
    assert find_mirror(tmp_path, "a/b") == tmp_path / "a__b"
    assert find_mirror(tmp_path, "c/d") == tmp_path / "c" / "d.git"
    assert find_mirror(tmp_path, "e/f") == tmp_path / "e__f.bundle"
    assert find_mirror(tmp_path, "g/h") == tmp_path / "g+h" / "repo"
    assert find_mirror(tmp_path, "x/y") is None


def test_clones_are_cached_once_and_fetched_for_new_commits(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    upstream = tmp_path / "upstream" / "octo" / "app"
    first = make_mirror(upstream)
    monkeypatch.setenv("REPOGYM_MIRRORS", str(tmp_path / "cache"))
    monkeypatch.setattr(mirrors, "URL_TEMPLATE", f"file://{tmp_path}/upstream/{{repo}}")
    found = Mirrors().get("octo/app", first)
    assert found == tmp_path / "cache" / "octo__app.git" and (found / "HEAD").exists()
    (upstream / "app.py").write_text("x = 2\n")
    second = commit_all(upstream, "next")
    assert Mirrors().get("octo/app", second) == found  # fetched, not cloned again
    with pytest.raises(TaskError, match="cloning .* failed .* pass --repos DIR"):
        Mirrors().get("octo/missing")


def test_failure_sections_are_found_under_long_names_too() -> None:
    """pytest pads a failure's header with underscores to the terminal's width, down to one
    each side for a long name; a traceback's ``_ _ _`` rule is no header."""
    from repogym.tasks.sources.offline import _sections

    log = (
        "=================================== FAILURES ===================================\n"
        "__________________________ Suite.test_short[a b] ___________________________\n"
        "E   socket.gaierror: [Errno -3] Temporary failure in name resolution\n"
        "_ Suite.test_accept_objects_with_string_representations_as_urls_and_more __\n"
        "    r = get(url)\n"
        "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _\n"
        "E   ConnectionError: Max retries exceeded\n"
        "=========================== short test summary info ============================\n"
        "FAILED t.py::Suite::test_short[a b] - socket.gaierror\n"
    )
    sections = _sections(log)
    assert list(sections) == ["Suite.test_short[a b]",
                              "Suite.test_accept_objects_with_string_representations_as_urls"
                              "_and_more"]
    assert "ConnectionError" in sections[list(sections)[1]]
    assert "short test summary" not in sections[list(sections)[1]]


def test_instances_the_file_lacks_are_named_and_refused(
        tmp_path: Path, repos: tuple[Path, str], capsys: pytest.CaptureFixture[str]) -> None:
    """#35: `--instances pallets__flask-9999` tried nothing and exited 0 ('nothing new to
    try'): the ids are named, with close matches, and the command exits 2 (bad input)."""
    from repogym.scripts.cli import main

    folder, base = repos
    file = tmp_path / "instances.jsonl"
    file.write_text(json.dumps(instance(base)) + "\n")
    out = tmp_path / "suite"
    code = main(["tasks", "add", "swebench", str(file), "--repos", str(folder), "--no-validate",
                 "--instances", "pallets__flask-9999,pallets__flask-7", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "pallets__flask-9999" in err and "close matches: pallets__flask-7" in err, err
    assert err.count("repogym: error:") == 1 and not out.exists()
    assert main(["tasks", "add", "swebench", str(file), "--repos", str(folder), "--no-validate",
                 "--instances", "pallets__flask-7", "--out", str(out)]) == 0


def test_a_mirror_given_as_a_bundle_is_used(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """--repos may hold DIR/owner__name.bundle: git cannot look a commit up in a bundle file
    ('Not a directory'), so it is cloned once into the mirror cache."""
    from repogym.tasks.sources.mirrors import Mirrors, has_commit

    base = make_mirror(tmp_path / "src")
    (tmp_path / "repos").mkdir()
    subprocess.run(["git", "bundle", "create", "--quiet", str(tmp_path / "repos/o__n.bundle"),
                    "--all"], cwd=tmp_path / "src", check=True)
    monkeypatch.setenv("REPOGYM_MIRRORS", str(tmp_path / "cache"))
    found = Mirrors(tmp_path / "repos", clone=False).get("o/n", base)
    assert found.is_dir() and has_commit(found, base)
    assert Mirrors(tmp_path / "repos", clone=False).get("o/n", base) == found  # made once
