"""What a harness needs from repogym, and how a harness that runs its own loop becomes an agent.

A harness (mini-swe-agent, SWE-agent, OpenHands, a terminal coding CLI) owns its loop: it asks
its model, runs commands, and decides when it is done. All it needs from repogym is a
:class:`Shell`: run a command in the episode's sandbox and get its output and exit code (and
read the diff, which is ``git diff`` in that shell). An adapter for a new harness is therefore
one class that hands the harness a ``Shell`` and its model's base URL (see
:mod:`repogym.agents.harness.minisweagent`).

Two ways to drive one:

- directly, with an environment you made: :class:`EnvShell` runs each command as one
  ``env.step``; submit with ``env.step({"tool": "submit"})`` when the harness returns;
- as a repogym agent (``repogym eval --agent harness:NAME``): :class:`HarnessAgent` runs the
  harness in a thread, and each command it runs becomes the next action of the evaluation
  loop, so episodes, records, retries and grading stay the runner's.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass
from typing import Any, Protocol

import gymnasium as gym

from repogym.agents.agent import SUBMIT, Action, AgentError

REPO_DIFF = "git add -A >/dev/null 2>&1; git -c core.pager=cat diff --cached HEAD"


@dataclass(frozen=True)
class CommandResult:
    """One command's output (stdout and stderr together) and exit code."""

    output: str
    exit_code: int
    timed_out: bool = False


class Shell(Protocol):
    """The episode's sandbox as a harness sees it."""

    def run(self, command: str, timeout: float | None = None) -> CommandResult:
        """Runs ``command`` in the episode's persistent shell, its output capped, for at most
        ``timeout`` seconds (never more than the environment's ``bash_timeout``)."""
        ...

    def diff(self) -> str:
        """The change so far against the task's base commit, as ``git diff`` prints it."""
        ...


def command_result(obs: str, info: dict[str, Any]) -> CommandResult:
    """A bash step as a command result: the command's own output (``info["output"]``, without
    the notes the observation adds for the model), its exit code and whether it timed out."""
    if info.get("action_error") or info.get("output") is None:
        return CommandResult(str(obs), -1)
    code = info.get("exit_code")
    return CommandResult(str(info["output"]), int(code) if code is not None else -1,
                         bool(info.get("timed_out")))


def bash_action(command: str, timeout: float | None) -> dict[str, Any]:
    return {"tool": "bash", "command": command, **({"timeout": timeout} if timeout else {})}


class EpisodeOver(Exception):  # noqa: N818 - a signal to the harness, not an error of it
    """The episode ended (truncated, or the evaluation moved on) while the harness ran."""


class EnvShell:
    """A :class:`Shell` over an environment you drive yourself (each command is one step)."""

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        self.env = env
        self.done = False

    def run(self, command: str, timeout: float | None = None) -> CommandResult:
        if self.done:
            raise EpisodeOver("the episode is over")
        obs, _reward, terminated, truncated, info = self.env.step(bash_action(command, timeout))
        self.done = bool(terminated or truncated)
        return command_result(str(obs), info)

    def diff(self) -> str:
        return self.run(REPO_DIFF).output


class Harness(Protocol):
    """Plays one episode to its end through ``shell``; returns when the harness is done."""

    def play(self, task: str, shell: Shell, info: dict[str, Any]) -> None: ...


class HarnessAgent:
    """A repogym :class:`~repogym.agents.agent.Agent` that runs a :class:`Harness` in a thread.

    ``act`` hands out the harness's next command and blocks until it has one; when the harness
    returns, the agent submits. A harness that raises fails the episode as an agent failure.
    """

    def __init__(self, harness: Harness, tasks: dict[str, Any] | None = None) -> None:
        self.harness = harness
        self.tasks = tasks or {}
        self.stop_reason: str | None = None
        self._thread: threading.Thread | None = None
        self._commands: queue.Queue[tuple[str, float | None] | None] = queue.Queue()
        self._results: queue.Queue[tuple[str, dict[str, Any]] | None] = queue.Queue()
        self._error: BaseException | None = None
        self._waiting = False

    def reset(self, obs: str, info: dict[str, Any]) -> None:
        self.close()
        self._commands, self._results = queue.Queue(), queue.Queue()
        self._error, self._waiting, self.stop_reason = None, False, None
        task = self.tasks.get(info.get("task_id", ""))
        statement = getattr(task, "problem_statement", None) or obs
        self._thread = threading.Thread(target=self._play, args=(statement, info),
                                        name="repogym-harness", daemon=True)
        self._thread.start()

    def act(self, obs: str, info: dict[str, Any]) -> Action:
        if self._waiting:  # the last action was the harness's command: this is its result
            self._results.put((obs, info))
            self._waiting = False
        command = self._commands.get()
        if command is None:  # the harness returned (or raised)
            if self._error is not None:
                raise AgentError(f"the harness failed: {type(self._error).__name__}: "
                                 f"{self._error}") from self._error
            self.stop_reason = self.stop_reason or "harness finished"
            return dict(SUBMIT)
        self._waiting = True
        return bash_action(*command)

    def close(self) -> None:
        """Ends a harness still waiting on a command (the episode ended without it)."""
        if self._thread is not None and self._thread.is_alive():
            self._results.put(None)
            self._thread.join(timeout=30)
        self._thread = None

    def _play(self, statement: str, info: dict[str, Any]) -> None:
        try:
            self.harness.play(statement, _BridgeShell(self), info)
        except EpisodeOver:
            pass
        except BaseException as exc:  # noqa: BLE001 - handed to the evaluation loop in act()
            self._error = exc
        finally:
            self._commands.put(None)


class _BridgeShell:
    def __init__(self, agent: HarnessAgent) -> None:
        self.agent = agent

    def run(self, command: str, timeout: float | None = None) -> CommandResult:
        self.agent._commands.put((command, timeout))
        result = self.agent._results.get()
        if result is None:
            raise EpisodeOver("the episode ended while the harness was running")
        return command_result(*result)

    def diff(self) -> str:
        return self.run(REPO_DIFF).output
