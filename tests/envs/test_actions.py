"""parse_action: every accepted form, and a helpful error for everything else."""

from __future__ import annotations

import dataclasses
import json

import pytest

from repogym.envs.actions import DEFAULT_MAX_ACTION_BYTES, ToolCall, parse_action
from repogym.errors import ActionError


def error_of(action: object, **kwargs: int) -> str:
    with pytest.raises(ActionError) as info:
        parse_action(action, **kwargs)
    message = str(info.value)
    # Every error says how to call a tool correctly, with an example.
    assert "<tool_call>" in message
    return message


# -- accepted forms -----------------------------------------------------------------------------


def test_dict_with_tool_key() -> None:
    call = parse_action({"tool": "bash", "command": "pytest -q"})
    assert call == ToolCall("bash", {"command": "pytest -q"}, call.raw)
    assert json.loads(call.raw) == {"tool": "bash", "command": "pytest -q"}


def test_dict_with_tool_key_and_no_arguments() -> None:
    assert parse_action({"tool": "submit"}).arguments == {}


def test_dict_with_tool_key_and_nested_arguments() -> None:
    call = parse_action({"tool": "view", "arguments": {"path": "a.py"}})
    assert (call.name, call.arguments) == ("view", {"path": "a.py"})


def test_name_and_arguments_dict() -> None:
    call = parse_action({"name": "view", "arguments": {"path": "src/x.py", "view_range": [1, 5]}})
    assert call.name == "view"
    assert call.arguments == {"path": "src/x.py", "view_range": [1, 5]}


def test_openai_arguments_as_json_string() -> None:
    call = parse_action({"name": "bash", "arguments": '{"command": "ls -la"}'})
    assert call.arguments == {"command": "ls -la"}


@pytest.mark.parametrize("empty", ["", "  ", None])
def test_openai_empty_arguments(empty: str | None) -> None:
    assert parse_action({"name": "submit", "arguments": empty}).arguments == {}


def test_openai_tool_call_object() -> None:
    action = {
        "id": "call_abc",
        "type": "function",
        "function": {
            "name": "insert",
            "arguments": '{"path": "a", "insert_line": 0, "new_str": "x"}',
        },
    }
    call = parse_action(action)
    assert call.name == "insert"
    assert call.arguments == {"path": "a", "insert_line": 0, "new_str": "x"}


def test_parameters_alias_and_flat_arguments() -> None:
    assert parse_action({"name": "bash", "parameters": {"command": "ls"}}).arguments == {
        "command": "ls"
    }
    assert parse_action({"name": "bash", "command": "ls"}).arguments == {"command": "ls"}


def test_json_string_of_either_form() -> None:
    text = '{"tool": "view", "path": "src/x.py"}'
    call = parse_action(text)
    assert (call.name, call.arguments, call.raw) == ("view", {"path": "src/x.py"}, text)
    call = parse_action('  {"name": "bash", "arguments": "{\\"command\\": \\"ls\\"}"}\n')
    assert (call.name, call.arguments) == ("bash", {"command": "ls"})


def test_json_in_a_code_fence() -> None:
    call = parse_action('```json\n{"name": "bash", "arguments": {"command": "ls"}}\n```')
    assert call.arguments == {"command": "ls"}


def test_tool_call_block_with_text_around_it() -> None:
    text = (
        "Let me look at the tests first.\n"
        '<tool_call>\n{"name": "bash", "arguments": {"command": "pytest -q tests"}}\n</tool_call>\n'
        "Then I will fix it."
    )
    call = parse_action(text)
    assert (call.name, call.arguments, call.raw) == ("bash", {"command": "pytest -q tests"}, text)


def test_tool_call_block_without_closing_tag_at_the_end() -> None:
    # Generation often stops at the closing tag, which then is not part of the text.
    call = parse_action('I will submit.\n<tool_call>{"name": "submit", "arguments": {}}\n')
    assert call.name == "submit"


def test_tool_call_block_whose_argument_mentions_the_tags() -> None:
    content = "x = '<tool_call>{}</tool_call>'\n"
    body = json.dumps({"name": "create", "arguments": {"path": "t.py", "file_text": content}})
    call = parse_action(f"<tool_call>{body}</tool_call>")
    assert call.arguments["file_text"] == content


def test_bytes_are_decoded() -> None:
    assert parse_action(b'{"tool": "submit"}').name == "submit"


def test_tool_call_is_frozen() -> None:
    call = parse_action({"tool": "submit"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        call.name = "bash"  # type: ignore[misc]


# -- malformed actions --------------------------------------------------------------------------


def test_malformed_json_string() -> None:
    message = error_of('{"tool": "bash", "command": "ls"')
    assert "not valid JSON" in message


def test_python_dict_syntax_is_reported() -> None:
    assert "double quotes" in error_of("{'tool': 'bash', 'command': 'ls'}")


def test_json_that_is_not_an_object() -> None:
    assert "not an array" in error_of('["bash", "ls"]')


def test_text_without_tool_call() -> None:
    assert "no tool call" in error_of("I think the bug is in parse().")


def test_two_tool_call_blocks() -> None:
    block = '<tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>'
    assert "found 2" in error_of(f"{block}\n{block}")


def test_invalid_json_inside_tool_call() -> None:
    message = error_of('<tool_call>{"name": "bash", "arguments": {command: "ls"}}</tool_call>')
    assert "JSON inside <tool_call> is invalid" in message


def test_text_after_json_inside_tool_call() -> None:
    message = error_of('<tool_call>{"name": "submit"} oops</tool_call>')
    assert "unexpected text" in message


def test_tool_call_block_holding_an_array() -> None:
    assert "JSON object" in error_of("<tool_call>[1, 2]</tool_call>")


@pytest.mark.parametrize(
    ("action", "phrase"),
    [
        ({"command": "ls"}, "names no tool"),
        ({"tool": 3, "command": "ls"}, "non-empty string"),
        ({"tool": "  "}, "non-empty string"),
        ({"name": None, "arguments": {}}, "non-empty string"),
        ({"name": "bash", "arguments": ["ls"]}, "must be a JSON object"),
        ({"name": "bash", "arguments": "ls -la"}, "not valid JSON"),
        ({"name": "bash", "arguments": "[1]"}, "must be a JSON object"),
        ({"name": "bash", "arguments": {"command": "ls"}, "timeout": 3}, "put every argument"),
        ({"name": "bash", "arguments": {}, "parameters": {}}, "once"),
        ({"name": "bash", "arguments": {1: "ls"}}, "must be strings"),
    ],
)
def test_malformed_dicts(action: dict, phrase: str) -> None:
    assert phrase in error_of(action)


@pytest.mark.parametrize("action", [None, 42, 1.5, ["bash", "ls"], ({"tool": "submit"},)])
def test_unsupported_types(action: object) -> None:
    error_of(action)


def test_dict_that_is_not_json_data() -> None:
    assert "not plain JSON" in error_of({"tool": "bash", "command": object()})


def test_non_utf8_bytes() -> None:
    assert "not UTF-8" in error_of(b'{"tool": "bash", "command": "\xff"}')


def test_deeply_nested_json_does_not_crash() -> None:
    deep = '{"tool": "bash", "command": ' + "[" * 100_000 + "]" * 100_000 + "}"
    error_of(deep)
    error_of("<tool_call>" + deep + "</tool_call>")


# -- size limit ---------------------------------------------------------------------------------


def test_one_megabyte_action_is_rejected() -> None:
    big = "x" * DEFAULT_MAX_ACTION_BYTES
    with pytest.raises(ActionError, match="over the limit of 1,000,000"):
        parse_action({"tool": "create", "path": "a", "file_text": big})
    with pytest.raises(ActionError, match="over the limit"):
        parse_action(json.dumps({"tool": "create", "path": "a", "file_text": big}))
    with pytest.raises(ActionError, match="in pieces"):
        parse_action(big.encode() + b"x")


def test_size_is_counted_in_utf8_bytes() -> None:
    text = json.dumps({"tool": "bash", "command": "é" * 600}, ensure_ascii=False)
    assert len(text) < 1000 < len(text.encode())
    with pytest.raises(ActionError, match="over the limit of 1,000"):
        parse_action(text, max_bytes=1000)


def test_action_just_under_the_limit_is_accepted() -> None:
    action = {"tool": "create", "path": "a", "file_text": "x" * (DEFAULT_MAX_ACTION_BYTES - 100)}
    assert len(parse_action(action).arguments["file_text"]) == DEFAULT_MAX_ACTION_BYTES - 100
