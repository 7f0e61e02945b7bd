"""Django's path, on a stand-in made from Django's sdist (django/django is too large to mirror
here): swebench's test command and log parser, the test directives as module names, validated
and graded by repogym and by swebench's run_instance on the same image."""

from __future__ import annotations

import json
import os
from pathlib import Path

import django_standin
import pytest

from repogym.schema import Task
from repogym.scripts.cli import main
from repogym.tasks.dataset_run import State


@pytest.mark.docker
def test_a_django_instance_is_graded_through_django_s_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    host = Path("/etc/ssl/certs/ca-certificates.crt")
    if not os.environ.get("REPOGYM_CA_BUNDLE") and host.is_file():
        monkeypatch.setenv("REPOGYM_CA_BUNDLE", str(host))
    archive = django_standin.sdist(tmp_path)
    repos = tmp_path / "repos"
    repos.mkdir()
    row = django_standin.instance(*django_standin.mirror(archive, repos))
    data = tmp_path / "django.jsonl"
    data.write_text(json.dumps(row) + "\n")
    env = tmp_path / "env.yaml"
    env.write_text(django_standin.ENV_YAML)
    out = tmp_path / "run"
    assert main(["swebench", "run", str(data), "--repos", str(repos), "--env", str(env),
                 "--out", str(out), "--runs", "1", "--kinds", "gold,empty"]) == 0
    record = State(out).read("django__django-99999")
    assert record is not None and record["verdict"] == "kept", record and record.get("reason")
    task = Task.from_dict(record["task"])
    assert task.environment.test_files == ("utils_tests.test_text",)
    assert task.environment.log_parser == "parse_log_django"
    assert task.FAIL_TO_PASS == tuple(django_standin.FAIL_TO_PASS)
    agreement = record["agreement"]
    assert (agreement["gold"]["repogym"], agreement["gold"]["swebench"]) == (True, True)
    assert (agreement["empty"]["repogym"], agreement["empty"]["swebench"]) == (False, False)
