"""Harbor task folders: the demo suite exported and imported back, graded in repogym."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from repogym.errors import TaskError
from repogym.images.repository import ensure_image
from repogym.sandbox.client import docker_client
from repogym.schema import Task
from repogym.suite import load_suite
from repogym.tasks.harbor_format import export_task, import_task, task_folders
from repogym.tasks.sources.common import SourceOptions
from repogym.tasks.sources.harbor import HarborSource
from repogym.tasks.validate import validate_task

DEMO = {t.instance_id: t for t in load_suite("demo")}
ONE = DEMO["demo__textkit-1"]


def test_export_writes_harbors_layout_and_imports_back(tmp_path: Path) -> None:
    folder = export_task(ONE, tmp_path)
    for path in ("task.toml", "instruction.md", "environment/Dockerfile", "environment/repo",
                 "tests/test.sh", "tests/config.json", "solution/solve.sh"):
        assert (folder / path).exists(), path
    config = tomllib.loads((folder / "task.toml").read_text())
    assert config["metadata"]["instance_id"] == ONE.instance_id
    assert config["environment"]["allow_internet"] is False
    assert (folder / "instruction.md").read_text().strip() == ONE.problem_statement.strip()
    back = import_task(folder)
    for key in ("instance_id", "repo", "patch", "test_patch", "FAIL_TO_PASS", "PASS_TO_PASS",
                "environment", "kind"):
        assert getattr(back, key) == getattr(ONE, key), key
    assert back.extra["upstream_base_commit"] == ONE.base_commit
    assert task_folders(tmp_path) == [folder] == task_folders(folder)


def test_a_verifier_that_is_only_a_script_is_refused(tmp_path: Path) -> None:
    (tmp_path / "t" / "tests").mkdir(parents=True)
    (tmp_path / "t" / "task.toml").write_text('schema_version = "1.1"\n')
    [rejected] = list(HarborSource(tmp_path, SourceOptions()).candidates())
    assert not isinstance(rejected, Task) and "no per-test lists" in rejected.reason
    with pytest.raises(TaskError, match="no Harbor task"):
        task_folders(tmp_path / "t" / "tests")


@pytest.mark.docker
def test_round_trip_gold_resolves_and_empty_does_not(tmp_path: Path) -> None:
    """Exported, imported back and validated in repogym; and the exported verifier itself,
    run as Harbor runs it (after the solution, /tests uploaded), writes reward 1.0."""
    folder = export_task(ONE, tmp_path / "harbor")
    [task] = list(HarborSource(tmp_path / "harbor", SourceOptions(runs=1)).candidates())
    assert isinstance(task, Task)
    result = validate_task(task, runs=1)
    assert result.ok and result.gold_resolved == [True] and result.empty_resolved == [False]
    image = ensure_image(task, progress=lambda _m: None).tag
    script = ("cp -r /harbor/tests /tests && bash /harbor/solution/solve.sh >/dev/null && "
              "bash /tests/test.sh && cat /logs/verifier/reward.txt && echo")
    out = docker_client().containers.run(
        image, ["bash", "-c", script], remove=True, user="root", network_mode="none",
        volumes={str(folder): {"bind": "/harbor", "mode": "ro"}}).decode()
    assert out.endswith("1.0\n"), out[-2000:]
    assert json.loads(out.splitlines()[-2])["passed"] is True  # the log parsed
