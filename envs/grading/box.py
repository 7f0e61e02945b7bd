"""The grading container: a Docker sandbox without a shell, with its root runner and, when the
pool started it ahead of time, pytest imported and waiting, twice (see ``warm_pytest``)."""

from __future__ import annotations

from typing import Any

from repogym.envs.grading import plugins
from repogym.envs.grading.warm_pytest import WarmPytest
from repogym.sandbox.base import SandboxConfig, SandboxLost
from repogym.sandbox.docker import DockerSandbox
from repogym.sandbox.root_runner import Runner

# the tests' environment, in a fresh process and in the waiting ones alike. The hash seed is
# fixed: a test parametrized over a set (isodate's TEST_CASES) gets ids that number its cases in
# the set's order (``expected25``), which with a random seed differs from one process to the
# next, so the ids that task creation measured named other cases, or none, in the next run
TEST_ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONHASHSEED": "0",
            # the test run may not make folders in /testbed (a new conftest.py there would
            # change the run): tools that keep their state in the project's root keep it in
            # /tmp (astropy__astropy-12907: Hypothesis's .hypothesis folder could not be made,
            # its warning was an error under astropy's filterwarnings, the conftest failed)
            "HYPOTHESIS_STORAGE_DIRECTORY": "/tmp/.hypothesis", "COVERAGE_FILE": "/tmp/.coverage",
            "MYPY_CACHE_DIR": "/tmp/.mypy_cache"}


class GradingBox(DockerSandbox):
    """A started grading container and the processes the grader talks to in it.

    ``runner`` runs the grader's scripts as root (``runner.py``). In a container the pool
    started while the agent worked, ``pytest`` and ``decoy_pytest`` are processes of the tests'
    user that imported pytest and wait for a run's arguments: the test run's and the decoy
    run's (``blind.py``); None otherwise, and the tests then run in fresh processes. All of
    them are closed with the container.
    """

    def __init__(self, config: SandboxConfig, warm: bool = False, client: Any = None):
        self._runner: Runner | None = None
        self.pytest: WarmPytest | None = None
        self.decoy_pytest: WarmPytest | None = None
        super().__init__(config, client)
        try:
            self.start_processes(warm)
        except BaseException:
            self.close()
            raise

    @classmethod
    def warmed(cls, config: SandboxConfig) -> GradingBox:
        """One with pytest imported ahead of time: what the pool starts for the grader."""
        return cls(config, warm=True)

    @property
    def runner(self) -> Runner:
        if self._runner is None:
            raise SandboxLost(f"{self.name} has no runner: it was closed")
        return self._runner

    def start_processes(self, warm: bool) -> None:
        """Starts the runner and, with ``warm``, pytest's imports, and waits for them (in the
        pool's filler thread: a ready container is warm through and through; a refusal or a
        slow import, and grading falls back or waits the rest)."""
        self._runner = Runner.start(self)
        if warm:
            # the image's pytest plugins, listed while the container is fresh (once per image)
            plugins.installed(self, self.config.image)
            self.pytest = WarmPytest.start(self, TEST_ENV)
            self.decoy_pytest = WarmPytest.start(self, TEST_ENV)
            for waiting in (self.pytest, self.decoy_pytest):
                waiting.wait_ready(30.0)

    def close_processes(self) -> None:
        """Closes the host's ends of the runner and the waiting pytest processes."""
        for part in (self.pytest, self.decoy_pytest, self._runner):
            if part is not None:
                part.close()
        self.pytest = self.decoy_pytest = self._runner = None

    def close(self) -> None:
        if not self._closed:
            self.close_processes()
        super().close()
