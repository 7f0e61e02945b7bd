"""Reading which paths a patch touches, on the host, before it reaches a container."""

from __future__ import annotations

from repogym.envs.grading import stage


def test_a_rename_names_both_paths() -> None:
    patch = ("diff --git a/tests/test_x.py b/x_moved.py\nsimilarity index 100%\n"
             "rename from tests/test_x.py\nrename to x_moved.py\n")
    assert stage.patch_paths(patch) == ["tests/test_x.py", "x_moved.py"]


def test_new_modified_and_deleted_files() -> None:
    patch = (
        "diff --git a/conftest.py b/conftest.py\nnew file mode 100644\n--- /dev/null\n"
        "+++ b/conftest.py\n@@ -0,0 +1 @@\n+x = 1\n"
        "diff --git a/pkg/a.py b/pkg/a.py\n--- a/pkg/a.py\n+++ b/pkg/a.py\n@@ -1 +1 @@\n-a\n+b\n"
        "diff --git a/old.py b/old.py\ndeleted file mode 100644\n--- a/old.py\n+++ /dev/null\n"
        "@@ -1 +0,0 @@\n-gone\n"
    )
    assert stage.patch_paths(patch) == ["conftest.py", "old.py", "pkg/a.py"]
    assert stage.protected_by_name(stage.patch_paths(patch), frozenset()) == {
        "conftest.py": "conftest"}


def test_an_empty_or_broken_patch_touches_nothing_it_does_not_name() -> None:
    assert stage.patch_paths("") == []
    assert stage.patch_paths("this is not a patch\n") == []


def test_setup_files_are_judged_by_content() -> None:
    changed = ["setup.cfg", "pkg/pyproject.toml", "tox.ini", "pytest.ini", "pkg/a.py"]
    stripped = stage.protected_by_name(changed, frozenset())
    assert stripped == {"pytest.ini": "pytest_config"}
    assert stage.content_checked(changed, stripped) == ["setup.cfg", "pkg/pyproject.toml",
                                                         "tox.ini"]
    assert stage.config_changed("setup.cfg", "[tool:pytest]\naddopts = -q\n",
                                "[tool:pytest]\naddopts = -k nothing\n")
    assert not stage.config_changed("setup.cfg", "[metadata]\nname = a\n",
                                    "[metadata]\nname = b\n")


def test_tox_ini_is_judged_by_its_pytest_section_unless_the_tests_run_under_tox() -> None:
    """parse's history: 4 of 5 commits bumped tox's envlist beside the fix, and each was
    rejected as "gold patch touches test paths ['tox.ini']"; pytest reads only [pytest]."""
    before = "[tox]\nenvlist = py27\n\n[testenv]\ncommands = python test_parse.py\n"
    envlist = before.replace("py27", "py27, py33")
    assert not stage.config_changed("tox.ini", before, envlist)
    assert stage.config_changed("tox.ini", before, envlist, tox=True)
    addopts = before + "\n[pytest]\naddopts = --collect-only -q\n"
    assert stage.config_changed("tox.ini", before, addopts)
    assert stage.config_changed("tox.ini", before, "[pytest\nbroken")
    # however the section is spelt, a line that names pytest is configuration
    assert stage.config_changed("tox.ini", before, before + "\n[ PyTest ]\naddopts = -x\n")


def test_the_script_output_is_read_by_its_markers() -> None:
    out = ("noise\n__RG_NUMSTAT=MQkwCWEucHkA\n__RG_APPLY=0 \n__RG_BEFORE0=YQ==\n__RG_AFTER0=Yg==\n"
           '__RG_CANARY={"path": "t/test_c.py"}\n__RG_STAGED=1\n')
    staged = stage.parse(out, ["setup.cfg"])
    assert staged.applied and staged.container_paths == ["a.py"] and staged.done
    assert staged.contents == {"setup.cfg": ("a", "b")}
    assert staged.canary == '{"path": "t/test_c.py"}'


def test_the_finish_script_plants_the_canaries_after_the_test_patch() -> None:
    script = stage.finish_script(["conftest.py"], True, ["tests/test_a.py"], [".", "tests"])
    grade_dir = stage.GRADE_DIR
    assert script.index(f"{grade_dir}/test.patch") < script.index(f"{grade_dir}/plant.py")
    assert script.index(f"{grade_dir}/plant.py") < script.index("chown root:root")
    assert "git checkout -q HEAD -- conftest.py" in script
    assert "plant.py" not in stage.finish_script([], False, [], ["."])
