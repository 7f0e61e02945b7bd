"""Turning an action (a dict, a JSON string, or raw model output) into one tool call.

Accepted forms:

- ``{"tool": "bash", "command": "ls"}``: the ``tool`` key names the tool, the other keys are its
  arguments;
- ``{"name": "bash", "arguments": {"command": "ls"}}``, where ``arguments`` may be a JSON string
  (as OpenAI returns it), and the OpenAI tool-call object ``{"type": "function", "function":
  {...}}`` around it;
- a JSON string of any of those;
- text that holds exactly one ``<tool_call>{...}</tool_call>`` block (the chat-template convention
  of Qwen and Hermes models); the text around it is ignored.

Anything else raises :class:`~repogym.errors.ActionError` whose message says what was wrong and
shows a correct call, so the environment can hand it to the agent as the observation.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from repogym.envs.tools_schemas import TOOL_NAMES, example_call
from repogym.errors import ActionError

DEFAULT_MAX_ACTION_BYTES = 1_000_000

OPEN_TAG = "<tool_call>"
CLOSE_TAG = "</tool_call>"

HOW_TO_CALL = (
    "Call exactly one tool per step, as a block like\n"
    f"{example_call('bash')}\n"
    "or as the JSON object inside it alone, or as a dict such as "
    '{"tool": "view", "path": "src/app.py"}. '
    f"Tools: {', '.join(TOOL_NAMES)}."
)

# Keys of the OpenAI tool-call object that carry no argument.
_ENVELOPE_KEYS = {"id", "type"}
_FENCE = re.compile(r"^```[A-Za-z0-9_-]*\s*\n(.*)\n\s*```$", re.DOTALL)


@dataclass(frozen=True)
class ToolCall:
    """One parsed call: the tool's name, its arguments, and the action as received."""

    name: str
    arguments: dict[str, Any]
    raw: str


def parse_action(action: object, max_bytes: int = DEFAULT_MAX_ACTION_BYTES) -> ToolCall:
    """Parses ``action`` into a :class:`ToolCall`.

    Raises :class:`ActionError` for anything malformed, or larger than ``max_bytes`` (UTF-8).
    """
    if isinstance(action, (bytes, bytearray)):
        action = _decode(bytes(action), max_bytes)
    if isinstance(action, str):
        _check_size(len(action.encode("utf-8", errors="surrogatepass")), max_bytes)
        return _from_dict(_from_text(action), raw=action)
    if isinstance(action, dict):
        raw = _dump(action)
        _check_size(len(raw.encode("utf-8", errors="surrogatepass")), max_bytes)
        return _from_dict(action, raw=raw)
    if isinstance(action, (list, tuple)):
        raise _error(
            f"the action is a {type(action).__name__} of {len(action)} items, not one call"
        )
    raise _error(f"the action is a {type(action).__name__}; pass a dict or a string")


def _error(what: str) -> ActionError:
    return ActionError(f"Invalid action: {what}.\n{HOW_TO_CALL}")


def _decode(data: bytes, max_bytes: int) -> str:
    _check_size(len(data), max_bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _error(f"the action bytes are not UTF-8 ({exc})") from None


def _check_size(n_bytes: int, max_bytes: int) -> None:
    if n_bytes > max_bytes:
        raise ActionError(
            f"Invalid action: it is {n_bytes:,} bytes, over the limit of {max_bytes:,}. "
            "Write big files in pieces: create the file with its first part, then add the rest "
            "with insert, or generate it with a short script run through bash."
        )


def _dump(action: dict) -> str:
    try:
        return json.dumps(action, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise _error(f"the action dict is not plain JSON data ({exc})") from None


def _from_text(text: str) -> dict:
    if OPEN_TAG in text:
        return _from_tagged(text)
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    if not body.startswith(("{", "[")):
        raise _error("no tool call found in the text")
    return _loads_object(body, "the action")


def _from_tagged(text: str) -> dict:
    """The one ``<tool_call>`` block in ``text``; a final block may lack its closing tag,
    because generation often stops at the closing tag."""
    blocks: list[dict] = []
    pos = 0
    decoder = json.JSONDecoder()
    while (at := text.find(OPEN_TAG, pos)) >= 0:
        start = _skip_space(text, at + len(OPEN_TAG))
        try:
            value, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError as exc:
            raise _error(f"the JSON inside {OPEN_TAG} is invalid: {_where(exc, start)}") from None
        except RecursionError:
            raise _error(f"the JSON inside {OPEN_TAG} is nested too deeply") from None
        if not isinstance(value, dict):
            raise _error(f"{OPEN_TAG} must hold a JSON object, not {_json_type(value)}")
        end = _skip_space(text, end)
        if text.startswith(CLOSE_TAG, end):
            pos = end + len(CLOSE_TAG)
        elif end == len(text):
            pos = end
        else:
            raise _error(
                f"unexpected text after the JSON object in {OPEN_TAG}: "
                f"{text[end : end + 40]!r}; close the block with {CLOSE_TAG}"
            )
        blocks.append(value)
    if len(blocks) != 1:
        raise _error(f"found {len(blocks)} {OPEN_TAG} blocks; send exactly one per step")
    return blocks[0]


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def _where(exc: json.JSONDecodeError, start: int) -> str:
    # JSONDecodeError counts from the start of the whole text; say where inside the block.
    return f"{exc.msg} at character {exc.pos - start} of the block"


def _loads_object(text: str, what: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _error(f"{what} is not valid JSON: {exc}") from None
    except RecursionError:
        raise _error(f"{what} is JSON nested too deeply") from None
    if not isinstance(value, dict):
        raise _error(f"{what} must be a JSON object, not {_json_type(value)}")
    return value


def _json_type(value: object) -> str:
    names = {
        list: "an array",
        str: "a string",
        int: "a number",
        float: "a number",
        bool: "a boolean",
    }
    return names.get(type(value), "null" if value is None else type(value).__name__)


def _from_dict(action: dict, raw: str) -> ToolCall:
    if "tool" in action:
        name = _name(action["tool"], "tool")
        rest = {k: v for k, v in action.items() if k != "tool"}
        if set(rest) == {"arguments"} and isinstance(rest["arguments"], (dict, str)):
            return ToolCall(name, _arguments(rest["arguments"]), raw)
        return ToolCall(name, rest, raw)
    if isinstance(action.get("function"), dict):
        return _from_dict(action["function"], raw)
    if "name" in action:
        return ToolCall(_name(action["name"], "name"), _named_arguments(action), raw)
    keys = ", ".join(map(repr, list(action)[:8])) or "none"
    raise _error(f"the action names no tool: it needs a 'tool' or 'name' key (its keys: {keys})")


def _named_arguments(action: dict) -> dict[str, Any]:
    given = [k for k in ("arguments", "parameters") if k in action]
    stray = [k for k in action if k not in {"name", *given, *_ENVELOPE_KEYS}]
    if len(given) > 1:
        raise _error("give the arguments once, under 'arguments' (not also 'parameters')")
    if not given:
        # {"name": "bash", "command": "ls"}: the arguments sit beside the name.
        return {k: action[k] for k in stray}
    if stray:
        raise _error(f"keys {stray} sit beside 'arguments'; put every argument inside it")
    return _arguments(action[given[0]])


def _arguments(value: object) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, str):
        if not value.strip():
            return {}
        value = _loads_object(value, "the 'arguments' string")
    if not isinstance(value, dict):
        raise _error(f"'arguments' must be a JSON object, not {_json_type(value)}")
    bad = [k for k in value if not isinstance(k, str)]
    if bad:
        raise _error(f"argument names must be strings, got {bad[:3]}")
    return dict(value)


def _name(value: object, key: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _error(f"{key!r} must be a non-empty string naming a tool, got {value!r:.60}")
    return value.strip()
