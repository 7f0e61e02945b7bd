"""Tools that keep their state in the project's root keep it in /tmp in a grading run, which
may not make folders in /testbed (astropy__astropy-12907: Hypothesis's example database,
.hypothesis/, could not be made at conftest import, and astropy's filterwarnings made its
warning an error: every test missing)."""

from __future__ import annotations

from pathlib import Path

import pytest
from toy_repo import TOY_PATCH, TOY_TEST_PATCH, write_toy_repo

from repogym.envs.grading.grader import Grader, GraderConfig
from repogym.images.repository import ensure_image
from repogym.repo import snapshot_commit
from repogym.schema import Task

# what Hypothesis does when a conftest registers a profile: its storage directory, from the
# environment or the working folder
CONFTEST = """\
import os

os.makedirs(os.path.join(os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY", ".hypothesis"),
                         "examples"), exist_ok=True)
"""


@pytest.mark.docker
def test_a_conftest_that_makes_its_state_folder_grades(tmp_path: Path) -> None:
    repo = write_toy_repo(tmp_path / "calc")
    (repo / "conftest.py").write_text(CONFTEST)
    task = Task(instance_id="toy__state-1", repo="toy/state", base_commit=snapshot_commit(repo),
                problem_statement="calc.add is wrong", patch=TOY_PATCH,
                test_patch=TOY_TEST_PATCH, FAIL_TO_PASS=("tests/test_add.py::test_add",),
                PASS_TO_PASS=("tests/test_mul.py::test_mul",), source=str(repo))
    image = ensure_image(task, progress=lambda _m: None).tag
    report = Grader(GraderConfig(cleanup_async=False)).grade(task, TOY_PATCH, image)
    assert report.valid and report.resolved, report.invalid_reasons
