"""Planted bugs in any language: what the Python and the other languages' synthetic sources
share. A source plants one mutation per candidate in a commit of the working repository (the
task's patch undoes it, the tests are the repository's own) and keeps a candidate only if some
test fails with the bug and some test still passes (a bug that fails every test usually means
the code no longer imports or builds). Subclasses find the mutations and write statements."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Generic, Protocol, TypeVar

from repogym.errors import RepogymError
from repogym.schema import Environment, Reference, Task

from .common import Deriver, Log, SourceOptions, WorkRepo, slug
from .deriver import default_deriver
from .statement_model import LLMConfig

FailureLog = Callable[[Task], str]


class Mutation(Protocol):
    """What both languages' mutations tell about themselves."""

    @property
    def file(self) -> str: ...

    @property
    def qualname(self) -> str: ...

    @property
    def operator(self) -> str: ...

    @property
    def key(self) -> str: ...

    @property
    def line(self) -> int: ...


M = TypeVar("M", bound=Mutation)


class PlantedBugSource(Generic[M]):
    """The candidate loop, the planted commit and the first checks of a synthetic source."""

    name = "synthetic"
    stops = "import"  # what a bug that fails every test usually stops the code from doing

    def __init__(self, work: WorkRepo, common: SourceOptions, environment: Environment,
                 llm: LLMConfig | None, derive: Deriver | None, log: Log,
                 failure_log: FailureLog) -> None:
        self.work, self.common, self.environment = work, common, environment
        self.llm, self.log, self.failure_log = llm, log, failure_log
        self.derive = derive or default_deriver(common.runs)

    def mutations(self) -> list[M]:
        raise NotImplementedError

    def materialize(self, mutation: M) -> Task | None:
        raise NotImplementedError

    def candidates(self) -> Iterator[Task]:
        for mutation in self.mutations():
            task = self.materialize(mutation)
            if task is not None:
                yield task

    def planted(self, mutation: M, buggy: str, reference: Reference | None = None,
                extra: dict[str, Any] | None = None) -> Task:
        """The candidate whose base commit holds ``buggy`` as ``mutation.file``."""
        base = self.work.commit_files({mutation.file: buggy}, f"Change {mutation.qualname}",
                                      f"synthetic/{mutation.key}")
        return Task(
            instance_id=f"{slug(self.work.name)}-synthetic-{mutation.operator}-{mutation.key}",
            repo=self.work.name, base_commit=base,
            problem_statement=f"A bug in {mutation.file} (written once the tests have run).",
            patch=self.work.diff(base, self.work.head), source=str(self.work.path),
            environment=self.environment, kind="synthetic", split=self.common.split,
            reference=reference,
            extra={"original_commit": self.work.head, "operator": mutation.operator,
                   "line": mutation.line, **(extra or {})},
        )

    def derived(self, task: Task) -> tuple[Task | None, str]:
        """The candidate with its lists, or why it is rejected."""
        done, reason = self.derive(task)
        if done is None:
            return None, reason
        if not done.PASS_TO_PASS:
            return None, (f"breaks every test: no test passes with the bug (does it still "
                          f"{self.stops}?)")
        return done, reason

    def test_output(self, done: Task) -> str:
        """What the failing tests printed (for the statement), or "" with a warning."""
        try:
            return self.failure_log(done)
        except RepogymError as err:
            self.log(f"warning: no test output for the statement of {done.instance_id}: {err}")
            return ""
