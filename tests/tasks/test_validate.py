"""Deriving and validating a task's lists in Docker: how failures are told apart."""

from __future__ import annotations

import pytest

from repogym.tasks.schema import Environment, Task
from repogym.tasks.validate import derive_lists, validate_task

pytestmark = pytest.mark.docker


def test_a_snapshot_whose_setup_fails_is_rejected_not_an_infrastructure_failure(
    toy_task: Task, toy_image: str
) -> None:
    broken = toy_task.with_(environment=Environment(setup=("echo cannot build >&2; exit 3",)))
    task, reason = derive_lists(broken, runs=1)
    assert task is None and reason.startswith("setup fails on this snapshot"), reason
    assert "cannot build" in reason
    result = validate_task(broken, runs=1)
    assert not result.ok and result.reason.startswith("setup fails"), result.reason
