"""Test runners for languages other than Python, chosen by name (``environment.runner``) or,
when a task names none, by its language."""

from __future__ import annotations

from repogym.schema import Environment

from .cargo import CargoTest
from .gotest import GoTest
from .js import Jest, Mocha, Vitest
from .junit import JUnit
from .language import Canary, TestRunner

RUNNERS: dict[str, type[TestRunner]] = {
    "jest": Jest, "mocha": Mocha, "vitest": Vitest, "gotest": GoTest, "cargo": CargoTest,
    "junit": JUnit,
}
DEFAULT_RUNNER = {"javascript": "jest", "typescript": "vitest", "go": "gotest",
                  "rust": "cargo", "java": "junit"}


def runner_name(env: Environment) -> str | None:
    """The runner that grades ``env``'s tests, or None for Python (pytest's own path)."""
    if env.runner:
        return env.runner
    return DEFAULT_RUNNER.get(env.language)


def get_runner(name: str) -> TestRunner:
    if name not in RUNNERS:
        raise ValueError(f"unknown test runner {name!r}; valid: {sorted(RUNNERS)}")
    return RUNNERS[name]()


__all__ = ["Canary", "DEFAULT_RUNNER", "RUNNERS", "TestRunner", "get_runner", "runner_name"]
