"""The decoy run collecting while the test run goes on, in a warm grading container, against a
real engine (``pytest_run.PytestRun``, ``blind.py``)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from toy_repo import new_file

from repogym.envs.grading.grader import Grader, GraderConfig
from repogym.sandbox.pool import SandboxPool
from repogym.schema import Task

pytestmark = pytest.mark.docker

# a test module that loads a hidden test file as a helper and calls a test of it: in the test
# run it must get the file as it is, not the decoy that stands at its path
USES = '''import importlib.util


def load():
    spec = importlib.util.spec_from_file_location("helper_add", "/testbed/tests/test_add.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_uses_the_hidden_file():
    module = load()
    module.test_add()
    assert hasattr(module, "test_add_negative")
'''


@pytest.fixture()
def pooled(toy_image: str) -> Iterator[tuple[Grader, SandboxPool]]:
    pool = SandboxPool(grader_size=1)
    grader = Grader(GraderConfig(timeout=60, decoy_p2p=2), seed=3, pool=pool)
    try:
        yield grader, pool
    finally:
        pool.close()


def _warm(pool: SandboxPool, grader: Grader, image: str) -> None:
    grader.warm(image)
    deadline = time.monotonic() + 120
    while pool._ready[(image, "grader")].qsize() < 1:
        assert time.monotonic() < deadline, pool.errors
        time.sleep(0.1)


def test_the_decoys_collect_during_the_test_run_and_fail_after_it(
    pooled: tuple[Grader, SandboxPool], toy_task: Task, toy_image: str
) -> None:
    grader, pool = pooled
    _warm(pool, grader, toy_image)
    gold = grader.grade(toy_task, toy_task.patch, toy_image)
    assert gold.resolved and gold.valid and not gold.flags, gold.invalid_reasons
    assert gold.warm_pytest and gold.decoy_warm  # the spare ran them, started with the tests
    # the hidden tests and the PASS_TO_PASS tests drawn for this grade, each failing
    assert set(gold.decoys) == {*toy_task.FAIL_TO_PASS, *toy_task.PASS_TO_PASS}
    assert set(gold.decoys.values()) == {"FAILED"}
    assert {"acquire", "stage", "run", "decoy", "collect", "score"} <= set(gold.stages)
    assert gold.decoy_seconds >= gold.stages["decoy"]  # it began with the test run


def test_a_hidden_file_loaded_as_a_helper_is_the_original_in_the_test_run(
    pooled: tuple[Grader, SandboxPool], toy_task: Task, toy_image: str
) -> None:
    grader, pool = pooled
    task = toy_task.with_(
        test_patch=toy_task.test_patch + new_file("tests/test_uses.py", USES),
        FAIL_TO_PASS=(*toy_task.FAIL_TO_PASS, "tests/test_uses.py::test_uses_the_hidden_file"))
    _warm(pool, grader, toy_image)
    gold = grader.grade(task, task.patch, toy_image)
    assert gold.resolved and gold.valid, (gold.invalid_reasons, gold.fail_to_pass)
    assert gold.decoy_warm
    assert gold.decoys["tests/test_uses.py::test_uses_the_hidden_file"] == "FAILED"


def test_without_the_overlap_the_spare_runs_the_decoys_after_the_test_run(
    toy_task: Task, toy_image: str
) -> None:
    pool = SandboxPool(grader_size=1)
    grader = Grader(GraderConfig(timeout=60, decoy_p2p=0, decoy_overlap=False), seed=4,
                    pool=pool)
    try:
        _warm(pool, grader, toy_image)
        gold = grader.grade(toy_task, toy_task.patch, toy_image)
    finally:
        pool.close()
    assert gold.resolved and gold.valid, gold.invalid_reasons
    assert gold.decoy_warm and set(gold.decoys) == set(toy_task.FAIL_TO_PASS)
    assert set(gold.decoys.values()) == {"FAILED"}
    assert gold.decoy_seconds <= gold.stages["decoy"] + 0.01  # it began after the test run
