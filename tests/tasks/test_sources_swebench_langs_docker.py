"""A SWE-bench Multilingual instance record, in the published schema, through Docker: its spec
(google/gson 2158, Maven on JDK 11) translated into repogym's Java environment, its image built
on the Java toolchain image with Debian's jars, and validated (gold resolves, empty does not)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from multilingual_fixture import TEST, make_gson_like

from repogym.schema import Task
from repogym.tasks.sources.common import SourceOptions
from repogym.tasks.sources.swebench import SwebenchOptions, SwebenchSource

pytestmark = pytest.mark.docker


def test_a_multilingual_java_instance_validates(tmp_path: Path) -> None:
    row = make_gson_like(tmp_path / "repos" / "google__gson")
    file = tmp_path / "multilingual.jsonl"
    file.write_text(json.dumps(row) + "\n")
    src = SwebenchSource(SwebenchOptions(file, tmp_path / "repos", clone=False),
                         SourceOptions(runs=1))
    [task] = list(src.candidates())
    assert isinstance(task, Task), task
    assert task.environment.language == "java" and task.environment.test_files == (TEST,)
    done, reason = src.check(task)
    assert done is not None, reason
    assert done.FAIL_TO_PASS == ("com.google.gson.functional.PrimitiveTest"
                                 "#testDoubleSerialization",)
