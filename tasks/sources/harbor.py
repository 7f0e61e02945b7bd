"""Harbor task folders as a task source: ``repogym tasks add harbor DIR --out OUT``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from repogym.errors import TaskError
from repogym.schema import Task
from repogym.tasks.flaky import without_flaky
from repogym.tasks.harbor_format import import_task, task_folders
from repogym.tasks.validate import relaxations, validate_task

from .common import Candidate, Rejected, SourceOptions
from .leak import leak_guard


class HarborSource:
    """Each task folder under a directory, validated like every other task."""

    name = "harbor"
    published_lists = True  # the lists are the dataset's: tests it marks flaky stay

    def __init__(self, root: Path, common: SourceOptions, validate: bool = True) -> None:
        self.root, self.common, self.validate = root, common, validate
        self.guard = leak_guard()

    def candidates(self) -> Iterator[Candidate]:
        for folder in task_folders(self.root):
            try:
                yield import_task(folder, self.common.split)
            except (TaskError, KeyError, ValueError, OSError) as err:
                yield Rejected(folder.name, "swe", f"not importable: {err}")

    def check(self, task: Task) -> tuple[Task | None, str]:
        if not self.validate:
            return task, "not validated (--no-validate)"
        leak = self.guard(task)
        if leak is not None:
            return None, leak
        task, result = without_flaky(task, validate_task(task, runs=self.common.runs),
                                     runs=self.common.runs)
        task, result = relaxations(task, result, runs=self.common.runs)
        return (task if result.ok else None), result.reason
