"""Tasks an agent can solve: what the image's install writes into the repository is part of the
base, gold is validated as an agent's diff, and a task whose played gold fails is named."""

from __future__ import annotations

import textwrap
from pathlib import Path

import gymnasium as gym
import pytest

import repogym  # noqa: F401  (registers the environment)
from repogym.images.repository import ensure_image
from repogym.repo import snapshot_commit
from repogym.schema import Environment, Task
from repogym.tasks.played import check_gold, gold_as_agent, play_gold, played
from repogym.tasks.validate import validate_task

pytestmark = pytest.mark.docker

# hidden tests with long names: the grader's reports (the canary planter's names each hidden
# test function) must hold them all, however long
N_CASES = 200

PROJECT = {
    # setuptools_scm writes the version file, an editable install the egg-info: both into the
    # repository, neither tracked by git (this sdist-like tree has no .gitignore)
    "pyproject.toml": """\
        [build-system]
        requires = ["setuptools>=64", "setuptools_scm>=8"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "scmcalc"
        dynamic = ["version"]

        [tool.setuptools]
        packages = ["scmcalc"]

        [tool.setuptools_scm]
        write_to = "scmcalc/_version.py"
        fallback_version = "0.0.0"
        """,
    "scmcalc/__init__.py": """\
        def add(a, b):
            return a - b
        """,
    "tests/test_version.py": """\
        from scmcalc import _version


        def test_version_is_written():
            assert _version.version
        """,
}

def _test_patch() -> str:
    body = ["from scmcalc import add", ""]
    for n in range(N_CASES):
        body += ["", f"def test_add_keeps_the_sign_of_a_rather_long_case_number_{n:04d}():",
                 f"    assert add({n}, 1) == {n + 1}"]
    lines = "".join(f"+{line}\n" for line in body)
    return ("diff --git a/tests/test_add.py b/tests/test_add.py\nnew file mode 100644\n"
            f"--- /dev/null\n+++ b/tests/test_add.py\n@@ -0,0 +1,{len(body)} @@\n{lines}")


PATCH = """\
diff --git a/scmcalc/__init__.py b/scmcalc/__init__.py
--- a/scmcalc/__init__.py
+++ b/scmcalc/__init__.py
@@ -1,2 +1,2 @@
 def add(a, b):
-    return a - b
+    return a + b
"""


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


@pytest.fixture(scope="module")
def scm_task(tmp_path_factory: pytest.TempPathFactory) -> Task:
    repo = _write(tmp_path_factory.mktemp("scm") / "scmcalc", PROJECT)
    ids = [f"tests/test_add.py::test_add_keeps_the_sign_of_a_rather_long_case_number_{n:04d}"
           for n in range(N_CASES)]
    return Task(instance_id="scm__calc-1", repo="scm/calc", base_commit=snapshot_commit(repo),
                problem_statement="add subtracts.", patch=PATCH, test_patch=_test_patch(),
                FAIL_TO_PASS=tuple(ids), PASS_TO_PASS=("tests/test_version.py::"
                                                       "test_version_is_written",),
                source=str(repo),
                environment=Environment(setup=("pip install -e .",)))


def _episode(task: Task, patch: str) -> tuple[float, dict, str]:
    env = gym.make("repogym/SWE-v0", tasks=[task])
    try:
        env.reset(options={"task_id": task.instance_id})
        status = ""
        if patch:
            env.step({"tool": "create", "path": "/tmp/gold.patch", "file_text": patch})
            obs, *_ = env.step({"tool": "bash",
                                "command": "git apply /tmp/gold.patch && git status --short"})
            status = str(obs)
        _, reward, terminated, _, info = env.step({"tool": "submit"})
        assert terminated
        return float(reward), info, status
    finally:
        env.close()


def test_what_the_install_writes_is_the_base_and_gold_played_scores_one(scm_task: Task) -> None:
    image = ensure_image(scm_task, progress=lambda _m: None)
    assert image.repo_commit != scm_task.base_commit  # the install's files are in the base
    reward, info, status = _episode(scm_task, scm_task.patch)
    # the agent sees its own change only: no version file, no egg-info
    assert "_version.py" not in status and "egg-info" not in status, status
    assert "scmcalc/__init__.py" in status, status
    assert reward == 1.0, (info.get("flags"), info.get("grading", {}).get("invalid_reasons"))
    grading = info["grading"]
    assert grading["valid"] and len(grading["fail_to_pass"]) == N_CASES
    assert set(grading["fail_to_pass"].values()) == {"PASSED"}
    empty, info, _ = _episode(scm_task, "")
    assert empty == 0.0 and info["grading"]["valid"]


def test_the_agents_own_new_files_still_count(scm_task: Task) -> None:
    image = ensure_image(scm_task, progress=lambda _m: None)
    adds = PATCH + textwrap.dedent("""\
        diff --git a/scmcalc/extra.py b/scmcalc/extra.py
        new file mode 100644
        --- /dev/null
        +++ b/scmcalc/extra.py
        @@ -0,0 +1 @@
        +HELPER = 1
        """)
    diff = played(image, adds)
    assert not diff.problem and not diff.extra and not diff.missing, diff
    assert "scmcalc/extra.py" in diff.diff and "_version.py" not in diff.diff


# a gold change that git in the agent's container cannot see: a new file under a path the
# repository's .gitignore names. Graded directly, gold resolves; as an agent's diff, it does not.
IGNORED = {
    ".gitignore": "calc/generated_*.py\n",
    "calc/__init__.py": """\
        def add(a, b):
            from calc.generated_ops import plus
            return plus(a, b)
        """,
    "tests/test_mul.py": """\
        def test_nothing_else():
            assert True
        """,
}

IGNORED_PATCH = """\
diff --git a/calc/generated_ops.py b/calc/generated_ops.py
new file mode 100644
--- /dev/null
+++ b/calc/generated_ops.py
@@ -0,0 +1,2 @@
+def plus(a, b):
+    return a + b
"""

IGNORED_TESTS = """\
diff --git a/tests/test_add.py b/tests/test_add.py
new file mode 100644
--- /dev/null
+++ b/tests/test_add.py
@@ -0,0 +1,4 @@
+from calc import add
+
+def test_add():
+    assert add(2, 3) == 5
"""


def test_validate_names_a_task_whose_gold_an_agent_cannot_submit(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    repo = _write(tmp_path_factory.mktemp("ignored") / "calc", IGNORED)
    task = Task(instance_id="ignored__calc-1", repo="ignored/calc",
                base_commit=snapshot_commit(repo), problem_statement="add fails.",
                patch=IGNORED_PATCH, test_patch=IGNORED_TESTS,
                FAIL_TO_PASS=("tests/test_add.py::test_add",),
                PASS_TO_PASS=("tests/test_mul.py::test_nothing_else",), source=str(repo))
    result = validate_task(task, runs=1)
    assert not result.ok
    assert result.reason.startswith("gold does not resolve it"), result.reason
    assert "calc/generated_ops.py" in result.reason and "lacks" in result.reason, result.reason
    why = gold_as_agent(task)
    assert why is not None and why.startswith("gold played as an agent's diff"), why


# a hidden test that passes before and after the fix, and reads its own module's name: the
# disguise (hidden tests under other names) fails it, whatever the change
NAMED = """\
diff --git a/tests/test_add.py b/tests/test_add.py
new file mode 100644
--- /dev/null
+++ b/tests/test_add.py
@@ -0,0 +1,17 @@
+from calc import add
+
+
+class Sum:
+    pass
+
+
+def test_add():
+    assert add(2, 3) == 5
+
+
+def test_add_negative():
+    assert add(-2, -3) == -5
+
+
+def test_named():
+    assert Sum.__module__.rpartition(".")[2] == "test_add"
"""


def test_a_layouts_first_gold_is_played_whole_and_its_others_on_the_failing_tests(
        toy_task: Task) -> None:
    tasks = [toy_task.with_(instance_id=f"toy__calc-{n}") for n in (1, 2, 3)]
    checks = play_gold(tasks, workers=2)
    assert [(checks[t.instance_id].why, checks[t.instance_id].whole) for t in tasks] == [
        (None, True), (None, False), (None, False)]
    assert all(c.whole for c in play_gold(tasks[:2], narrow=False).values())


def test_a_layout_whose_gold_fails_whole_is_never_narrowed(toy_task: Task) -> None:
    named = [toy_task.with_(instance_id=f"toy__calc-named-{n}", test_patch=NAMED,
                            PASS_TO_PASS=(*toy_task.PASS_TO_PASS, "tests/test_add.py::test_named"))
             for n in (1, 2)]
    # on the failing tests alone the disguise meets no test that reads its name: that grade
    # cannot see what breaks an agent's reward here, which is why a layout is proven whole first
    assert check_gold(named[1], narrow=True) == type(check_gold(named[1]))(None, whole=False)
    checks = play_gold(named, workers=2)
    for task in named:
        check = checks[task.instance_id]
        assert check.whole and check.why is not None, check
        assert "test_named" in check.why, check.why


# a hidden test that passes alone and fails after another test of its file: the whole grade
# fails it (as a test asserting on wall time fails on a busy machine), graded alone it passes
ORDERED = """\
diff --git a/tests/test_add.py b/tests/test_add.py
new file mode 100644
--- /dev/null
+++ b/tests/test_add.py
@@ -0,0 +1,19 @@
+from calc import add
+
+SEEN = []
+
+
+def test_add():
+    assert add(2, 3) == 5
+
+
+def test_add_negative():
+    assert add(-2, -3) == -5
+
+
+def test_leaves_a_mark():
+    SEEN.append(1)
+
+
+def test_sees_no_mark():
+    assert not SEEN
"""


def test_a_listed_test_that_fails_whole_and_passes_alone_leaves_the_lists(
        toy_task: Task) -> None:
    flipping = "tests/test_add.py::test_sees_no_mark"
    task = toy_task.with_(instance_id="toy__calc-ordered", test_patch=ORDERED,
                          PASS_TO_PASS=(*toy_task.PASS_TO_PASS,
                                        "tests/test_add.py::test_leaves_a_mark", flipping))
    check = check_gold(task)
    assert check.why is None and check.whole and check.task is not None, check
    kept = check.task
    assert flipping not in kept.PASS_TO_PASS and kept.FAIL_TO_PASS == task.FAIL_TO_PASS
    assert set(kept.PASS_TO_PASS) == set(task.PASS_TO_PASS) - {flipping}
    assert "passed graded alone" in kept.extra["dropped_tests"][flipping]
    assert kept.extra["flaky_tests"][flipping] == {"gold graded": {"FAILED": 1, "PASSED": 1}}
    # and the task kept resolves with its gold, whole
    assert gold_as_agent(kept) is None
    # the layout's next task, graded on its failing tests, loses the same test
    second = task.with_(instance_id="toy__calc-ordered-2")
    checks = play_gold([task, second], workers=1)
    assert [checks[t.instance_id].whole for t in (task, second)] == [True, False]
    for one in (task, second):
        after = checks[one.instance_id].task
        assert after is not None and flipping not in after.PASS_TO_PASS, checks[one.instance_id]
    assert "of toy__calc-ordered," in after.extra["dropped_tests"][flipping]
