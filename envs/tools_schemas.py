"""The tools' contract: OpenAI function-calling schemas, usage lines, and argument checking.

The schemas are the single source of truth: the argument checker reads them, so what an LLM
client is told and what the toolbox accepts cannot drift apart.
"""

from __future__ import annotations

import json
import operator
from typing import Any


class CallError(Exception):
    """The agent's call was wrong; the toolbox turns this into an error observation."""


def _schema(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        },
    }


_PATH = {
    "type": "string",
    "description": "File or folder path, absolute or relative to the repository root.",
}

TOOL_SCHEMAS: list[dict] = [
    _schema(
        "bash",
        "Run a bash command in one persistent shell that starts in the repository root. The "
        "working folder and exported variables persist between calls. Each call has a time limit "
        "and its output is capped (head and tail are kept). stdin is closed, so do not start "
        "interactive programs (editors, pagers, REPLs); background processes end with the call.",
        {"command": {"type": "string", "description": "The command line to run."},
         "timeout": {"type": "number",
                     "description": "Optional time limit in seconds for this call; the "
                     "environment's limit applies when it is absent or higher."}},
        ["command"],
    ),
    _schema(
        "view",
        "Show a file with line numbers (like `cat -n`), or list a folder two levels deep "
        "(hidden entries left out). Long files are cut; use view_range to page through them.",
        {
            "path": _PATH,
            "view_range": {
                "type": "array",
                "items": {"type": "integer"},
                "minItems": 2,
                "maxItems": 2,
                "description": "Optional [start, end] line numbers, 1-based and inclusive; "
                "end -1 means to the end of the file.",
            },
        },
        ["path"],
    ),
    _schema(
        "create",
        "Create a new file with the given text; missing parent folders are created. It refuses "
        "to overwrite an existing file: edit those with str_replace or insert.",
        {"path": _PATH, "file_text": {"type": "string", "description": "The whole new file."}},
        ["path", "file_text"],
    ),
    _schema(
        "str_replace",
        "Replace the one exact occurrence of old_str in a file with new_str. old_str must match "
        "verbatim, whitespace and indentation included, and occur exactly once: include enough "
        "surrounding lines to make it unique.",
        {
            "path": _PATH,
            "old_str": {"type": "string", "description": "The exact text to replace."},
            "new_str": {
                "type": "string",
                "description": "The replacement text (default: empty, which deletes old_str).",
            },
        },
        ["path", "old_str"],
    ),
    _schema(
        "insert",
        "Insert text after a given line of a file (0 inserts at the top).",
        {
            "path": _PATH,
            "insert_line": {
                "type": "integer",
                "description": "The line after which to insert; 0 for the top of the file.",
            },
            "new_str": {"type": "string", "description": "The text to insert."},
        },
        ["path", "insert_line", "new_str"],
    ),
    _schema(
        "undo_edit",
        "Restore a file to its content before the last create, str_replace or insert on it. "
        "Repeated calls go further back.",
        {"path": _PATH},
        ["path"],
    ),
    _schema(
        "submit",
        "Submit the current state of the repository as the final answer and end the episode.",
        {},
        [],
    ),
]

TOOL_NAMES: tuple[str, ...] = tuple(s["function"]["name"] for s in TOOL_SCHEMAS)

_BY_NAME: dict[str, dict] = {s["function"]["name"]: s["function"] for s in TOOL_SCHEMAS}

EXAMPLES: dict[str, dict[str, Any]] = {
    "bash": {"command": "grep -rn 'def main' src | head"},
    "view": {"path": "src/app.py", "view_range": [1, 40]},
    "create": {"path": "src/new_module.py", "file_text": "def f():\n    return 1\n"},
    "str_replace": {"path": "src/app.py", "old_str": "return a - b", "new_str": "return a + b"},
    "insert": {"path": "src/app.py", "insert_line": 10, "new_str": "import os\n"},
    "undo_edit": {"path": "src/app.py"},
    "submit": {},
}


def example_call(name: str) -> str:
    """One correct call of ``name`` in the ``<tool_call>`` form (its JSON also works alone)."""
    body = json.dumps({"name": name, "arguments": EXAMPLES[name]})
    return f"<tool_call>{body}</tool_call>"


def usage(name: str) -> str:
    """How to call ``name``: its signature and an example."""
    params = _BY_NAME[name]["parameters"]
    parts = []
    for arg, spec in params["properties"].items():
        optional = "" if arg in params["required"] else "?"
        parts.append(f"{arg}{optional}: {_type_name(spec)}")
    return f"Usage: {name}({', '.join(parts)}). Example:\n{example_call(name)}"


def _type_name(spec: dict) -> str:
    if spec["type"] == "array":
        return f"[{spec['items']['type']}, {spec['items']['type']}]"
    return str(spec["type"])


def check_arguments(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments of a call to ``name``, checked against its schema.

    Raises :class:`CallError` naming the offending argument and the expected type.
    """
    params = _BY_NAME[name]["parameters"]
    props: dict[str, dict] = params["properties"]
    unknown = sorted(str(k) for k in arguments if k not in props)
    if unknown:
        allowed = ", ".join(props) or "none"
        raise CallError(f"{name} got unexpected argument(s) {unknown}; it takes: {allowed}.")
    missing = [k for k in params["required"] if k not in arguments]
    if missing:
        raise CallError(f"{name} is missing the required argument(s) {missing}.")
    return {k: _check_value(name, k, props[k], v) for k, v in arguments.items()}


def _check_value(tool: str, arg: str, spec: dict, value: Any) -> Any:
    kind = spec["type"]
    if kind == "string" and isinstance(value, str):
        return value
    if kind == "integer" and (n := _as_int(value)) is not None:
        return n
    if kind == "number" and isinstance(value, (int, float)) and not isinstance(value, bool) \
            and value > 0:
        return float(value)
    if kind == "array" and isinstance(value, (list, tuple)) and len(value) == spec["maxItems"]:
        items = [_as_int(v) for v in value]
        if all(i is not None for i in items):
            return items
    shown = json.dumps(value, default=repr)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    raise CallError(
        f"{tool}: argument {arg!r} must be {_describe(spec)}, got {type(value).__name__} {shown}."
    )


def _as_int(value: Any) -> int | None:
    # bool is an int subclass, but `true` for a line number is a mistake worth reporting.
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def _describe(spec: dict) -> str:
    if spec["type"] == "array":
        return f"a list of {spec['maxItems']} integers, e.g. [1, 40]"
    return {"string": "a string", "integer": "an integer",
            "number": "a positive number"}[spec["type"]]
