"""The agent's tools over the fake sandbox: every tool, and every way a call can go wrong."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from repogym.envs.actions import ToolCall, parse_action
from repogym.envs.tools import TOOL_NAMES, TOOL_SCHEMAS, Toolbox, ToolResult
from repogym.errors import SandboxError
from repogym.sandbox.base import SandboxConfig
from repogym.sandbox.fake import FakeSandbox

APP = "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n"
# A file name that is not UTF-8, as Python spells it (surrogateescape) and as JSON carries it.
ODD_NAME = os.fsdecode(b"caf\xe9.txt")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src" / "pkg" / "deep").mkdir(parents=True)
    (root / "src" / "app.py").write_text(APP)
    (root / "src" / "pkg" / "__init__.py").write_text("")
    (root / "src" / "pkg" / "deep" / "hidden_by_depth.py").write_text("x = 1\n")
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / ".env").write_text("SECRET=1\n")
    (root / "README.md").write_text("# demo\n")
    return root


@pytest.fixture
def sandbox(repo: Path) -> Iterator[FakeSandbox]:
    sb = FakeSandbox(SandboxConfig(image="x"), source=repo)
    yield sb
    sb.close()


@pytest.fixture
def box(sandbox: FakeSandbox) -> Toolbox:
    return Toolbox(sandbox, bash_timeout=10.0)


def run(box: Toolbox, tool: str, **arguments: object) -> ToolResult:
    return box.call(ToolCall(tool, dict(arguments), raw=""))


def ok(box: Toolbox, tool: str, **arguments: object) -> ToolResult:
    result = run(box, tool, **arguments)
    assert result.error is None, result.output
    return result


def failed(box: Toolbox, tool: str, **arguments: object) -> ToolResult:
    result = run(box, tool, **arguments)
    assert result.error is not None, result.output
    assert result.error in result.output
    assert "Example:" in result.output or "<tool_call>" in result.output
    return result


def disk(sandbox: FakeSandbox, path: str) -> bytes:
    return (Path(sandbox.workdir) / path).read_bytes()


# -- schemas ------------------------------------------------------------------------------------


def test_schemas_are_openai_function_json() -> None:
    assert json.loads(json.dumps(TOOL_SCHEMAS)) == TOOL_SCHEMAS
    names = [s["function"]["name"] for s in TOOL_SCHEMAS]
    assert names == list(TOOL_NAMES)
    assert set(names) >= {"bash", "view", "create", "str_replace", "insert", "undo_edit", "submit"}
    for schema in TOOL_SCHEMAS:
        assert schema["type"] == "function"
        params = schema["function"]["parameters"]
        assert params["type"] == "object"
        assert set(params["required"]) <= set(params["properties"])
        assert schema["function"]["description"]


# -- bash ---------------------------------------------------------------------------------------


def test_bash_output_and_exit_code(box: Toolbox) -> None:
    result = ok(box, "bash", command="echo hello; cat README.md")
    assert result.output == "hello\n# demo\n"
    assert result.exit_code == 0
    failing = ok(box, "bash", command="echo oops >&2; exit 3")
    assert failing.exit_code == 3
    assert failing.output == "oops\n[exit code 3]"


def test_bash_shell_state_persists(box: Toolbox) -> None:
    ok(box, "bash", command="cd src && export GREETING=hi")
    assert ok(box, "bash", command="echo $GREETING; ls").output == "hi\napp.py\npkg\n"


def test_bash_no_output_is_said(box: Toolbox) -> None:
    assert ok(box, "bash", command="true").output == "[no output]"


def test_bash_timeout(sandbox: FakeSandbox) -> None:
    result = ok(Toolbox(sandbox, bash_timeout=0.5), "bash", command="echo start; sleep 30")
    assert result.timed_out
    assert result.output.startswith("start\n")
    assert "timed out after 0.5 s" in result.output
    # The shell survives the timeout.
    assert ok(Toolbox(sandbox), "bash", command="echo alive").output == "alive\n"


def test_bash_argument_errors(box: Toolbox) -> None:
    assert "must be a string" in failed(box, "bash", command=["ls"]).output
    assert "Usage: bash(command: string, timeout?: number)" in failed(
        box, "bash", command=["ls"]).output
    assert "missing the required argument(s) ['command']" in failed(box, "bash").output
    assert "empty" in failed(box, "bash", command="   ").output
    assert "unexpected argument(s) ['cwd']" in failed(box, "bash", command="ls", cwd="/").error
    assert "must be a positive number" in failed(box, "bash", command="ls", timeout="5").error


# -- view ---------------------------------------------------------------------------------------


def test_view_file_with_line_numbers(box: Toolbox, sandbox: FakeSandbox) -> None:
    out = ok(box, "view", path="src/app.py").output
    assert "(lines 1-6 of 6)" in out
    assert "     1\tdef add(a, b):\n     2\t    return a - b\n" in out
    absolute = ok(box, "view", path=os.path.join(sandbox.workdir, "src/app.py")).output
    assert absolute == out


def test_view_range(box: Toolbox) -> None:
    out = ok(box, "view", path="src/app.py", view_range=[5, 6]).output
    assert "     5\tdef sub(a, b):\n     6\t    return a - b\n" in out
    assert "     4\t" not in out
    assert "     2\t" in ok(box, "view", path="src/app.py", view_range=[2, -1]).output
    assert "(lines 5-6 of 6)" in ok(box, "view", path="src/app.py", view_range=[5, 99]).output


@pytest.mark.parametrize(
    ("view_range", "phrase"),
    [
        ([0, 3], "numbered from 1"),
        ([7, 9], "the file has 6 lines"),
        ([4, 2], "end must be >= start"),
        ([1], "a list of 2 integers"),
        ([1, "3"], "a list of 2 integers"),
        ("1:3", "a list of 2 integers"),
        ([True, 3], "a list of 2 integers"),
    ],
)
def test_view_range_errors(box: Toolbox, view_range: object, phrase: str) -> None:
    assert phrase in failed(box, "view", path="src/app.py", view_range=view_range).output


def test_view_folder_two_levels_without_hidden(box: Toolbox) -> None:
    out = ok(box, "view", path=".").output
    listed = out.splitlines()[1:]
    assert listed == ["README.md", "src/", "src/app.py", "src/pkg/"]
    sub = ok(box, "view", path="src").output.splitlines()[1:]
    assert sub == ["app.py", "pkg/", "pkg/__init__.py", "pkg/deep/"]
    assert "view_range applies to files" in failed(box, "view", path="src", view_range=[1, 2]).error


def test_view_folder_with_a_hidden_name_lists_its_content(box: Toolbox) -> None:
    assert "HEAD" in ok(box, "view", path=".git").output


def test_view_missing_file(box: Toolbox) -> None:
    assert "does not exist" in failed(box, "view", path="src/nope.py").output


def test_view_huge_file_is_capped_with_a_hint(sandbox: FakeSandbox) -> None:
    box = Toolbox(sandbox, max_view_bytes=1000)
    lines = "".join(f"line number {i}\n" for i in range(1, 5001))
    (Path(sandbox.workdir) / "big.txt").write_text(lines)
    out = ok(box, "view", path="big.txt").output
    assert len(out.encode()) < 1600
    assert "of 5000)" in out
    assert "output capped at 1000 bytes" in out
    shown = [row for row in out.splitlines() if "\tline number" in row]
    last = len(shown)
    assert f"view_range [{last + 1}, {2 * last}]" in out
    nxt = ok(box, "view", path="big.txt", view_range=[last + 1, 2 * last]).output
    assert f"{last + 1:6}\tline number {last + 1}\n" in nxt


def test_view_one_huge_line_is_cut(sandbox: FakeSandbox) -> None:
    (Path(sandbox.workdir) / "min.js").write_text("short\n" + "x" * 100_000 + "\nend\n")
    box = Toolbox(sandbox, max_view_bytes=1000)
    out = ok(box, "view", path="min.js", view_range=[2, 3]).output
    assert "line cut" in out and "sed -n 2p" in out
    assert len(out) < 2000


def test_view_file_over_the_file_limit(sandbox: FakeSandbox) -> None:
    (Path(sandbox.workdir) / "data.bin").write_bytes(b"a\n" * 5000)
    box = Toolbox(sandbox, max_view_bytes=1000, max_file_bytes=2000)
    assert "10,000 bytes, over the 2,000" in failed(box, "view", path="data.bin").error


def test_view_binary_and_empty_files(box: Toolbox, sandbox: FakeSandbox) -> None:
    (Path(sandbox.workdir) / "blob").write_bytes(b"\x7fELF\x00\x01\x02")
    (Path(sandbox.workdir) / "empty.txt").write_bytes(b"")
    assert "binary file (7 bytes)" in ok(box, "view", path="blob").output
    assert "is empty" in ok(box, "view", path="empty.txt").output


def test_view_non_utf8_content_and_name(box: Toolbox, sandbox: FakeSandbox) -> None:
    (Path(sandbox.workdir) / ODD_NAME).write_bytes(b"caf\xe9 au lait\n\xff\xfe\n")
    out = ok(box, "view", path=ODD_NAME).output
    assert "     1\tcaf\ufffd au lait\n" in out
    assert "caf\\udce9.txt" in out
    out.encode("utf-8")  # a valid observation: no lone surrogates
    listing = ok(box, "view", path=".").output
    listing.encode("utf-8")
    assert "caf\ufffd.txt" in listing


# -- create -------------------------------------------------------------------------------------


def test_create_with_parent_folders(box: Toolbox, sandbox: FakeSandbox) -> None:
    result = ok(box, "create", path="new/sub/mod.py", file_text="x = 'é'\n")
    assert "created" in result.output
    assert disk(sandbox, "new/sub/mod.py") == "x = 'é'\n".encode()


def test_create_refuses_to_overwrite(box: Toolbox, sandbox: FakeSandbox) -> None:
    result = failed(box, "create", path="src/app.py", file_text="gone")
    assert "already exists" in result.error and "str_replace" in result.error
    assert disk(sandbox, "src/app.py") == APP.encode()
    assert "is a folder" in failed(box, "create", path="src", file_text="x").error


def test_create_argument_errors(box: Toolbox) -> None:
    assert "missing the required argument(s) ['file_text']" in failed(box, "create", path="a").error
    assert "'file_text' must be a string" in failed(box, "create", path="a", file_text=3).error
    assert "'path' is empty" in failed(box, "create", path="", file_text="x").error


def test_create_with_a_non_utf8_name(box: Toolbox, sandbox: FakeSandbox) -> None:
    ok(box, "create", path=ODD_NAME, file_text="hi\n")
    assert os.fsencode(ODD_NAME) in os.listdir(os.fsencode(sandbox.workdir))


def test_create_text_that_cannot_be_encoded(box: Toolbox) -> None:
    assert "cannot be written as UTF-8" in failed(box, "create", path="a", file_text="\ud800").error


# -- str_replace --------------------------------------------------------------------------------


def test_str_replace_shows_a_snippet(box: Toolbox, sandbox: FakeSandbox) -> None:
    old = "def add(a, b):\n    return a - b"
    out = ok(box, "str_replace", path="src/app.py", old_str=old, new_str=old.replace("-", "+"))
    assert "     2\t    return a + b\n" in out.output
    assert disk(sandbox, "src/app.py").decode() == APP.replace("a - b", "a + b", 1)


def test_str_replace_old_str_absent(box: Toolbox, sandbox: FakeSandbox) -> None:
    result = failed(box, "str_replace", path="src/app.py", old_str="return a * b", new_str="")
    assert "does not occur verbatim" in result.error
    assert disk(sandbox, "src/app.py") == APP.encode()


def test_str_replace_not_unique_names_the_lines(box: Toolbox, sandbox: FakeSandbox) -> None:
    result = failed(box, "str_replace", path="src/app.py", old_str="return a - b", new_str="x")
    assert "occurs 2 times" in result.error and "lines 2, 6" in result.error
    assert disk(sandbox, "src/app.py") == APP.encode()


def test_str_replace_overlapping_occurrences_are_not_unique(
    box: Toolbox, sandbox: FakeSandbox
) -> None:
    (Path(sandbox.workdir) / "a.txt").write_text("aaa\n")
    assert "occurs 2 times" in failed(box, "str_replace", path="a.txt", old_str="aa").error


def test_str_replace_default_new_str_deletes(box: Toolbox, sandbox: FakeSandbox) -> None:
    ok(box, "str_replace", path="README.md", old_str=" demo")
    assert disk(sandbox, "README.md") == b"#\n"


def test_str_replace_errors(box: Toolbox) -> None:
    assert "old_str is empty" in failed(box, "str_replace", path="src/app.py", old_str="").error
    assert "does not exist" in failed(box, "str_replace", path="x.py", old_str="a").error
    assert "is a folder" in failed(box, "str_replace", path="src", old_str="a").error
    wrong = failed(box, "str_replace", path="src/app.py", old_str=None, new_str="x")
    assert "'old_str' must be a string, got NoneType null" in wrong.error
    assert "Usage: str_replace(path: string, old_str: string, new_str?: string)" in wrong.output


def test_str_replace_keeps_bytes_that_are_not_utf8(box: Toolbox, sandbox: FakeSandbox) -> None:
    (Path(sandbox.workdir) / "latin1.py").write_bytes(b"name = 'caf\xe9'\nvalue = 1\n")
    ok(box, "str_replace", path="latin1.py", old_str="value = 1", new_str="value = 2")
    assert disk(sandbox, "latin1.py") == b"name = 'caf\xe9'\nvalue = 2\n"


# -- insert -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (0, "new\na\nb\n"),
        (1, "a\nnew\nb\n"),
        (2, "a\nb\nnew\n"),
    ],
)
def test_insert(box: Toolbox, sandbox: FakeSandbox, line: int, expected: str) -> None:
    (Path(sandbox.workdir) / "f.txt").write_text("a\nb\n")
    out = ok(box, "insert", path="f.txt", insert_line=line, new_str="new").output
    assert f"{line + 1:6}\tnew\n" in out
    assert disk(sandbox, "f.txt").decode() == expected


def test_insert_at_the_end_of_a_file_without_final_newline(
    box: Toolbox, sandbox: FakeSandbox
) -> None:
    (Path(sandbox.workdir) / "f.txt").write_text("a\nb")
    ok(box, "insert", path="f.txt", insert_line=2, new_str="c\nd\n")
    assert disk(sandbox, "f.txt") == b"a\nb\nc\nd"


def test_insert_errors(box: Toolbox) -> None:
    out_of_range = failed(box, "insert", path="src/app.py", insert_line=7, new_str="x").error
    assert "has 6 lines, so use 0 (the top) to 6" in out_of_range
    assert (
        "out of range" in failed(box, "insert", path="src/app.py", insert_line=-1, new_str="").error
    )
    as_text = failed(box, "insert", path="src/app.py", insert_line="3", new_str="x").error
    assert "'insert_line' must be an integer" in as_text
    assert (
        "must be an integer"
        in failed(box, "insert", path="src/app.py", insert_line=True, new_str="x").error
    )


# -- undo_edit ----------------------------------------------------------------------------------


def test_undo_edit_walks_back_through_edits(box: Toolbox, sandbox: FakeSandbox) -> None:
    ok(box, "insert", path="README.md", insert_line=1, new_str="one")
    ok(box, "str_replace", path="README.md", old_str="one", new_str="two")
    assert disk(sandbox, "README.md") == b"# demo\ntwo\n"
    assert "undone" in ok(box, "undo_edit", path="README.md").output
    assert disk(sandbox, "README.md") == b"# demo\none\n"
    ok(box, "undo_edit", path=os.path.join(sandbox.workdir, "README.md"))
    assert disk(sandbox, "README.md") == b"# demo\n"
    assert "no edit of" in failed(box, "undo_edit", path="README.md").error


def test_undo_create_removes_the_file(box: Toolbox, sandbox: FakeSandbox) -> None:
    ok(box, "create", path="tmp.py", file_text="x\n")
    assert "removed" in ok(box, "undo_edit", path="tmp.py").output
    assert not (Path(sandbox.workdir) / "tmp.py").exists()


def test_undo_without_history(box: Toolbox) -> None:
    ok(box, "bash", command="echo changed > README.md")
    assert "not bash commands" in failed(box, "undo_edit", path="README.md").error


def test_undo_history_is_bounded(sandbox: FakeSandbox) -> None:
    box = Toolbox(sandbox, history_depth=2)
    for i in range(4):
        ok(box, "insert", path="README.md", insert_line=0, new_str=str(i))
    ok(box, "undo_edit", path="README.md")
    ok(box, "undo_edit", path="README.md")
    assert disk(sandbox, "README.md") == b"1\n0\n# demo\n"
    failed(box, "undo_edit", path="README.md")


# -- submit, unknown tools, parsing end to end --------------------------------------------------


def test_submit(box: Toolbox) -> None:
    result = ok(box, "submit")
    assert result.submitted and not result.timed_out
    wrong = failed(box, "submit", patch="diff")
    assert not wrong.submitted


def test_unknown_tool(box: Toolbox) -> None:
    result = run(box, "python", code="print(1)")
    assert result.error is not None and "unknown tool 'python'" in result.error
    assert "bash, view, create" in result.output and "<tool_call>" in result.output


def test_editor_alias_with_command_argument(box: Toolbox) -> None:
    call = ToolCall("str_replace_editor", {"command": "view", "path": "README.md"}, raw="")
    assert "     1\t# demo" in box.call(call).output


def test_tool_call_text_and_openai_form_end_to_end(box: Toolbox, sandbox: FakeSandbox) -> None:
    text = (
        "I'll fix the sign.\n<tool_call>\n"
        + json.dumps(
            {
                "name": "str_replace",
                "arguments": {"path": "src/app.py", "old_str": "def sub", "new_str": "def minus"},
            }
        )
        + "\n</tool_call>"
    )
    assert box.call(parse_action(text)).error is None
    openai = {"name": "bash", "arguments": json.dumps({"command": "grep -c minus src/app.py"})}
    assert box.call(parse_action(openai)).output == "1\n"


# -- sandbox failures ---------------------------------------------------------------------------


class ErrorSandbox(FakeSandbox):
    """A fake whose file reads fail the way a container's can."""

    message = ""

    def read_file(self, path: str) -> bytes:
        raise SandboxError(self.message)


def test_sandbox_errors_about_the_path_are_results(repo: Path) -> None:
    sb = ErrorSandbox(SandboxConfig(image="x"), source=repo)
    try:
        sb.message = "cat: /testbed/src/app.py: No such file or directory"
        result = failed(Toolbox(sb), "view", path="src/app.py")
        assert "does not exist" in result.error
        sb.message = "the container stopped"
        with pytest.raises(SandboxError, match="container stopped"):
            Toolbox(sb).call(ToolCall("view", {"path": "src/app.py"}, raw=""))
    finally:
        sb.close()


def test_closed_sandbox_raises(repo: Path) -> None:
    sb = FakeSandbox(SandboxConfig(image="x"), source=repo)
    box = Toolbox(sb)
    sb.close()
    with pytest.raises(RuntimeError):
        box.call(ToolCall("bash", {"command": "ls"}, raw=""))


@pytest.mark.parametrize(
    "kwargs",
    [{"bash_timeout": 0}, {"max_view_bytes": 10}, {"max_file_bytes": 300}, {"history_depth": 0}],
)
def test_toolbox_config_is_checked(sandbox: FakeSandbox, kwargs: dict) -> None:
    with pytest.raises(ValueError):
        Toolbox(sandbox, **kwargs)


def test_view_folder_through_a_symlink(box: Toolbox, sandbox: FakeSandbox) -> None:
    os.symlink("src", os.path.join(sandbox.workdir, "link"))
    assert "app.py" in ok(box, "view", path="link").output.splitlines()[1:]
