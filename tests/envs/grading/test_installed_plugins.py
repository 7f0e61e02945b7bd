"""The pytest plugins the environment installed load in every run; the repository's own do not
(``envs/grading/plugins.py``), against a real engine.

blinker 1.9's configuration sets ``asyncio_mode = "auto"`` under ``filterwarnings = error``:
with plugin autoload off and pytest-asyncio not named, that unknown key stopped every run, and
`tasks add pypi blinker==1.9.0` kept none of its candidates."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest

from repogym.envs.grading import plugins
from repogym.envs.grading.grader import Grader, GraderConfig
from repogym.images.repository import ensure_image
from repogym.repo import snapshot_commit
from repogym.sandbox.base import SandboxConfig
from repogym.sandbox.docker import DockerSandbox
from repogym.sandbox.pool import SandboxPool
from repogym.schema import Environment, Task

FILES = {
    "pyproject.toml": """\
        [build-system]
        requires = ["setuptools>=64"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "acalc"
        version = "1.0"

        [project.entry-points.pytest11]
        acalc = "acalc.plugin"

        [tool.setuptools]
        packages = ["acalc"]

        [tool.pytest.ini_options]
        asyncio_mode = "auto"
        asyncio_default_fixture_loop_scope = "function"
        filterwarnings = ["error"]
        """,
    "acalc/__init__.py": """\
        async def add(a, b):
            return a - b
        """,
    # the project's own plugin: code the agent can change, so never loaded by the harness
    "acalc/plugin.py": """\
        import pytest


        @pytest.fixture
        def from_the_repository():
            return 1
        """,
    "tests/test_sub.py": """\
        async def test_sub_stays():
            from acalc import add
            assert await add(2, 0) == 2
        """,
}

TEST_PATCH = """\
diff --git a/tests/test_add.py b/tests/test_add.py
new file mode 100644
--- /dev/null
+++ b/tests/test_add.py
@@ -0,0 +1,5 @@
+from acalc import add
+
+
+async def test_add():
+    assert await add(2, 3) == 5
"""

PATCH = """\
diff --git a/acalc/__init__.py b/acalc/__init__.py
--- a/acalc/__init__.py
+++ b/acalc/__init__.py
@@ -1,2 +1,2 @@
 async def add(a, b):
-    return a - b
+    return a + b
"""


# the agent's own "pytest_asyncio" at the repository's root: as a plugin it would pass every test
SHADOWING = """\
diff --git a/pytest_asyncio/__init__.py b/pytest_asyncio/__init__.py
new file mode 100644
--- /dev/null
+++ b/pytest_asyncio/__init__.py
@@ -0,0 +1 @@
+
diff --git a/pytest_asyncio/plugin.py b/pytest_asyncio/plugin.py
new file mode 100644
--- /dev/null
+++ b/pytest_asyncio/plugin.py
@@ -0,0 +1,6 @@
+import pytest
+
+
+@pytest.hookimpl(tryfirst=True)
+def pytest_configure(config):
+    print("HIJACKED")
"""


def test_a_plugin_the_diff_shadows_is_not_named() -> None:
    found = (("asyncio", "pytest_asyncio.plugin"), ("mock", "pytest_mock"))
    assert plugins.unshadowed(found, ["pytest_asyncio/plugin.py", "acalc/__init__.py"]) == (
        ("mock", "pytest_mock"),)
    assert plugins.unshadowed(found, ["pytest_mock.py"]) == (
        ("asyncio", "pytest_asyncio.plugin"),)
    assert plugins.unshadowed(found, ["src/pytest_mock.py", "tests/pytest_asyncio.py"]) == found


@pytest.fixture(scope="module")
def async_task(tmp_path_factory: pytest.TempPathFactory) -> Task:
    repo = tmp_path_factory.mktemp("async") / "acalc"
    for name, text in FILES.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return Task(instance_id="async__acalc-1", repo="async/acalc",
                base_commit=snapshot_commit(Path(repo)), problem_statement="add subtracts.",
                patch=PATCH, test_patch=TEST_PATCH, FAIL_TO_PASS=("tests/test_add.py::test_add",),
                PASS_TO_PASS=("tests/test_sub.py::test_sub_stays",), source=str(repo),
                environment=Environment(setup=("pip install -e . pytest-asyncio",)))


@pytest.mark.docker
def test_the_environments_plugins_load_and_the_repositorys_do_not(async_task: Task) -> None:
    tag = ensure_image(async_task, progress=lambda _m: None).tag
    plugins._cache.pop(tag, None)
    with DockerSandbox(SandboxConfig(image=tag, role="grader")) as box:
        found = plugins.installed(box, tag)
    modules = {module for _name, module in found}
    assert "pytest_asyncio.plugin" in modules, found
    assert "acalc.plugin" not in modules, found  # declared by the repository, lives in it
    grader = Grader(GraderConfig(cleanup_async=False))
    gold = grader.grade(async_task, PATCH, tag)
    assert gold.resolved and gold.valid, (gold.fail_to_pass, gold.pass_to_pass,
                                          gold.invalid_reasons)
    empty = grader.grade(async_task, "", tag)
    assert not empty.resolved and empty.valid
    assert empty.fail_to_pass == {"tests/test_add.py::test_add": "FAILED"}
    assert empty.pass_to_pass == {"tests/test_sub.py::test_sub_stays": "PASSED"}
    # a diff that writes the plugin's top-level package at the root would have its own code
    # loaded as the plugin (`python -m pytest` puts /testbed first): that plugin is not named
    shadow = PATCH + SHADOWING
    hijacked = grader.grade(async_task, shadow, tag)
    assert not hijacked.resolved, (hijacked.fail_to_pass, hijacked.invalid_reasons)
    assert "HIJACKED" not in hijacked.log_tail
    # and in a warm grading container, whose waiting pytest imported pytest ahead of the run
    pool = SandboxPool(grader_size=1)
    try:
        warm = Grader(GraderConfig(), pool=pool)
        warm.warm(tag)
        deadline = time.monotonic() + 60
        while pool._ready[(tag, "grader")].qsize() < 1:
            assert time.monotonic() < deadline, pool.errors
            time.sleep(0.1)
        report = warm.grade(async_task, PATCH, tag)
        assert report.warm_pytest and report.resolved and report.valid, report.invalid_reasons
    finally:
        pool.close()


def test_a_plugin_the_configuration_turns_off_stays_off() -> None:
    found = (("asyncio", "pytest_asyncio.plugin"), ("randomly", "pytest_randomly"))
    assert plugins.plugin_args(found) == ["-p", "pytest_asyncio.plugin", "-p", "pytest_randomly"]
    assert plugins.plugin_args(found, ("randomly",)) == ["-p", "pytest_asyncio.plugin"]
    assert plugins.plugin_args(found, ("pytest_asyncio.plugin",)) == ["-p", "pytest_randomly"]
    from repogym.envs.grading.plant import addopts_blocked, addopts_plugins

    addopts = ["-p", "no:randomly", "-pxdist", "-p", "no:cacheprovider", "-q"]
    assert addopts_blocked(addopts) == ["randomly", "cacheprovider"]
    assert addopts_plugins(addopts) == ["xdist"]
