"""The agent's tools: bash, view, create, str_replace, insert, undo_edit and submit.

:class:`Toolbox` runs one parsed :class:`~repogym.envs.actions.ToolCall` against a sandbox and
returns a :class:`ToolResult`. Whatever the agent got wrong (an unknown tool, a bad argument, a
missing file, an ambiguous ``old_str``) comes back as a result with ``error`` set and the tool's
usage in ``output``; only failures of the sandbox itself raise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from repogym.envs.actions import HOW_TO_CALL, ToolCall
from repogym.envs.tools_edit import Editor
from repogym.envs.tools_schemas import (
    TOOL_NAMES,
    TOOL_SCHEMAS,
    CallError,
    check_arguments,
    usage,
)
from repogym.sandbox.base import Sandbox

__all__ = ["TOOL_NAMES", "TOOL_SCHEMAS", "ToolResult", "Toolbox"]

# Models trained on SWE-agent's or Anthropic's single editor tool name it and pick the action
# with a "command" argument; both map onto the separate tools here.
_EDITOR_ALIASES = {"str_replace_editor", "str_replace_based_edit_tool"}
_EDITOR_COMMANDS = {"view", "create", "str_replace", "insert", "undo_edit"}


@dataclass(frozen=True)
class ToolResult:
    """What one tool call produced.

    ``output`` is the observation text. ``exit_code`` is the shell's for bash, None for the
    other tools. ``error`` is set when the call itself was wrong. ``submitted`` is True after
    ``submit``; ``timed_out`` when a bash command hit its time limit. ``command_output``: for
    bash, what the command printed, without the notes the observation adds for the model
    (``[exit code N]``, the time-out note); None for the other tools.
    """

    output: str
    exit_code: int | None = None
    error: str | None = None
    submitted: bool = False
    timed_out: bool = False
    command_output: str | None = None


class Toolbox:
    """The tools over one sandbox; it keeps the undo history of the files it edits."""

    def __init__(
        self,
        sandbox: Sandbox,
        bash_timeout: float = 60.0,
        max_view_bytes: int = 16_000,
        max_file_bytes: int = 10_000_000,
        history_depth: int = 20,
    ) -> None:
        if not bash_timeout > 0:
            raise ValueError(f"bash_timeout={bash_timeout} must be > 0 seconds.")
        if max_view_bytes < 256:
            raise ValueError(f"max_view_bytes={max_view_bytes} is too small: use at least 256.")
        if max_file_bytes < max_view_bytes:
            raise ValueError(
                f"max_file_bytes={max_file_bytes} is below max_view_bytes={max_view_bytes}: "
                "raise it."
            )
        if history_depth < 1:
            raise ValueError(f"history_depth={history_depth} must be at least 1.")
        self.sandbox = sandbox
        self.bash_timeout = bash_timeout
        self.editor = Editor(sandbox, max_view_bytes, max_file_bytes, history_depth)

    def call(self, call: ToolCall) -> ToolResult:
        """Runs ``call``. Raises only when the sandbox itself fails."""
        name, arguments = _normalize(call)
        if name not in TOOL_NAMES:
            message = f"unknown tool {name!r}; the tools are {', '.join(TOOL_NAMES)}."
            return ToolResult(f"Error: {message}\n{HOW_TO_CALL}", error=message)
        try:
            return self._dispatch(name, check_arguments(name, arguments))
        except CallError as exc:
            return ToolResult(f"Error: {exc}\n{usage(name)}", error=str(exc))

    def _dispatch(self, name: str, args: dict[str, Any]) -> ToolResult:
        if name == "bash":
            return self._bash(args["command"], args.get("timeout"))
        if name == "submit":
            return ToolResult("Submitted.", submitted=True)
        if name == "view":
            return ToolResult(self.editor.view(args["path"], args.get("view_range")))
        if name == "create":
            return ToolResult(self.editor.create(args["path"], args["file_text"]))
        if name == "str_replace":
            edit = self.editor.str_replace(args["path"], args["old_str"], args.get("new_str", ""))
            return ToolResult(edit)
        if name == "insert":
            edit = self.editor.insert(args["path"], args["insert_line"], args["new_str"])
            return ToolResult(edit)
        return ToolResult(self.editor.undo_edit(args["path"]))

    def _bash(self, command: str, timeout: float | None = None) -> ToolResult:
        """Runs ``command`` for at most ``timeout`` seconds, never more than ``bash_timeout``.

        The model reads only the observation, so a failing command says so there
        (``[exit code N]``); programs read ``info["exit_code"]`` and ``info["output"]`` (the
        output without the notes) instead of parsing it."""
        if not command.strip():
            raise CallError("'command' is empty; give a command line such as `ls`.")
        limit = self.bash_timeout if timeout is None else min(timeout, self.bash_timeout)
        result = self.sandbox.run(command, timeout=limit)
        notes = []
        if result.timed_out:
            notes.append(
                f"[the command timed out after {limit:g} s and was killed. Narrow it "
                "down (fewer tests, a smaller input); processes do not outlive their command.]"
            )
        elif result.exit_code != 0:
            notes.append(f"[exit code {result.exit_code}]")
        output = result.output
        if notes and output and not output.endswith("\n"):
            output += "\n"
        output += "\n".join(notes)
        return ToolResult(output or "[no output]", exit_code=result.exit_code,
                          timed_out=result.timed_out, command_output=result.output)


def _normalize(call: ToolCall) -> tuple[str, dict[str, Any]]:
    command = call.arguments.get("command")
    if call.name in _EDITOR_ALIASES and command in _EDITOR_COMMANDS:
        return str(command), {k: v for k, v in call.arguments.items() if k != "command"}
    return call.name, call.arguments
