"""The file tools: view, create, str_replace, insert and undo_edit.

They follow the str_replace_editor convention of SWE-agent and Anthropic's text editor tool:
``cat -n`` views, exact unique replacement, ``create`` never overwrites, and a per-file undo
history kept on the host. File contents are decoded with ``surrogateescape`` so an edit of a
file that is not UTF-8 writes its other bytes back unchanged.
"""

from __future__ import annotations

import base64
import posixpath
import shlex
from collections.abc import Iterable

from repogym.envs.tools_files import (
    PROBE_TIMEOUT,
    decode,
    encode,
    make_parents,
    printable,
    probe,
    read_bytes,
    remove,
    resolve,
    shown_path,
    write_bytes,
)
from repogym.envs.tools_schemas import CallError
from repogym.sandbox.base import Sandbox

SNIPPET_CONTEXT = 4
MAX_LISTING = 1000
_EDITED_NOTE = "Review the changes and make sure they are as expected; edit again if necessary."


def split_lines(text: str) -> list[str]:
    """Lines as ``cat -n`` numbers them: only ``\\n`` ends a line, a final one adds no line."""
    if not text:
        return []
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return lines


class Editor:
    """The file tools over one sandbox, with the undo history of every file they changed."""

    def __init__(
        self, sandbox: Sandbox, max_view_bytes: int, max_file_bytes: int, history_depth: int
    ) -> None:
        self.sandbox = sandbox
        self.max_view_bytes = max_view_bytes
        self.max_file_bytes = max_file_bytes
        self.history_depth = history_depth
        # Content before each edit, newest last; None means the file did not exist.
        self._history: dict[str, list[bytes | None]] = {}

    def history_state(self) -> dict[str, list[str | None]]:
        """The undo history, base64 text per version (None: the file did not exist)."""
        return {path: [None if v is None else base64.b64encode(v).decode() for v in stack]
                for path, stack in self._history.items()}

    def load_history(self, state: dict[str, list[str | None]]) -> None:
        self._history = {path: [None if v is None else base64.b64decode(v) for v in stack]
                         for path, stack in state.items()}

    # -- view ---------------------------------------------------------------------------------

    def view(self, path: str, view_range: list[int] | None = None) -> str:
        target = resolve(self.sandbox.workdir, path)
        info = probe(self.sandbox, target)
        if info.kind == "dir":
            if view_range is not None:
                raise CallError(f"view_range applies to files; {shown_path(target)} is a folder.")
            return self._listing(target)
        data = self._read(target, info.kind, info.size)
        if b"\x00" in data[:8192]:
            return (
                f"{shown_path(target)} is a binary file ({len(data)} bytes); view shows text only. "
                f"Use bash instead, e.g. `xxd {shlex.quote(target)} | head -n 20`."
            )
        lines = split_lines(printable(decode(data)))
        if not lines and view_range is None:
            return f"{shown_path(target)} is empty."
        start, end = _check_range(view_range, len(lines))
        rows, cut = self._fit(f"{i:6}\t{lines[i - 1]}\n" for i in range(start, end + 1))
        last = start + len(rows) - 1
        head = f"Here's the result of running `cat -n` on {shown_path(target)} "
        head += f"(lines {start}-{last} of {len(lines)}):\n"
        return head + "".join(rows) + self._more_note(target, len(lines), start, end, last, cut)

    def _more_note(self, target: str, n: int, start: int, end: int, last: int, cut: bool) -> str:
        if cut:
            return (
                f"[line {last} is longer than {self.max_view_bytes} bytes and was cut; see it "
                f"in pieces with bash, e.g. `sed -n {last}p {shlex.quote(target)} | "
                "cut -c 1-2000`]\n"
            )
        if last >= end:
            return ""
        nxt = [last + 1, min(end, 2 * last - start + 1)]
        return (
            f"[output capped at {self.max_view_bytes} bytes: showing lines {start}-{last} of "
            f"{n}. To see more, call view with view_range {nxt}, or search with bash "
            "`grep -n PATTERN FILE`.]\n"
        )

    def _fit(self, rows: Iterable[str]) -> tuple[list[str], bool]:
        """The leading ``rows`` that fit in ``max_view_bytes``, and whether the first row had
        to be cut to fit at all."""
        kept: list[str] = []
        size = 0
        for row in rows:
            size += len(row.encode("utf-8"))
            if size > self.max_view_bytes:
                if kept:
                    return kept, False
                cut = row.encode("utf-8")[: self.max_view_bytes].decode("utf-8", errors="ignore")
                return [cut + " [... line cut]\n"], True
            kept.append(row)
        return kept, False

    def _listing(self, target: str) -> str:
        q = shlex.quote(target)
        command = (
            f"command -p find -H {q} -mindepth 1 -maxdepth 2 -name '.*' -prune "
            "-o -type d -printf '%P/\\n' -o -printf '%P\\n' "
            f"| LC_ALL=C command -p sort | command -p head -n {MAX_LISTING + 1}"
        )
        result = self.sandbox.run(command, timeout=PROBE_TIMEOUT)
        entries = [entry for entry in result.output.split("\n") if entry]
        note = ""
        if len(entries) > MAX_LISTING:
            entries = entries[:MAX_LISTING]
            note = f"[listing cut at {MAX_LISTING} entries: view a subfolder, or use bash find]\n"
        if not entries:
            return f"{shown_path(target)} is an empty folder (hidden entries are not listed)."
        rows, _ = self._fit(entry + "\n" for entry in entries)
        if len(rows) < len(entries):
            note = f"[listing cut at {len(rows)} entries: view a subfolder, or use bash find]\n"
        head = (
            f"Files and folders in {shown_path(target)}, two levels deep (hidden ones left out):\n"
        )
        return head + "".join(rows) + note

    # -- edits --------------------------------------------------------------------------------

    def create(self, path: str, file_text: str) -> str:
        target = resolve(self.sandbox.workdir, path)
        info = probe(self.sandbox, target)
        if info.kind == "dir":
            raise CallError(f"{shown_path(target)} is a folder; give the path of a new file.")
        if info.kind != "missing":
            raise CallError(
                f"{shown_path(target)} already exists, and create does not overwrite files. "
                "Edit it with str_replace or insert (or delete it with bash first)."
            )
        data = encode(file_text, "file_text")
        make_parents(self.sandbox, target)
        write_bytes(self.sandbox, target, data)
        self._remember(target, None)
        return f"File created successfully at {shown_path(target)}."

    def str_replace(self, path: str, old_str: str, new_str: str = "") -> str:
        target, text = self._load(path)
        if not old_str:
            raise CallError("old_str is empty; to add text without replacing any, use insert.")
        at = _occurrences(text, old_str)
        where = shown_path(target)
        if not at:
            raise CallError(
                f"No replacement was performed: old_str does not occur verbatim in {where}. "
                "Check whitespace and indentation; view the file and copy the exact text."
            )
        if len(at) > 1:
            numbers = sorted({text.count("\n", 0, i) + 1 for i in at})
            shown = ", ".join(map(str, numbers[:20])) + (", ..." if len(numbers) > 20 else "")
            raise CallError(
                f"No replacement was performed: old_str occurs {len(at)} times in {where}, at "
                f"lines {shown}. Include more surrounding lines so that it is unique."
            )
        new_text = text[: at[0]] + new_str + text[at[0] + len(old_str) :]
        self._save(target, text, new_text)
        first = text.count("\n", 0, at[0]) + 1
        return self._edited(target, new_text, first, first + new_str.count("\n"))

    def insert(self, path: str, insert_line: int, new_str: str) -> str:
        target, text = self._load(path)
        n_lines = len(split_lines(text))
        if not 0 <= insert_line <= n_lines:
            raise CallError(
                f"insert_line={insert_line} is out of range: {shown_path(target)} has {n_lines} "
                f"lines, so use 0 (the top) to {n_lines} (the end)."
            )
        offset = _line_offset(text, insert_line)
        block = new_str if new_str.endswith("\n") else new_str + "\n"
        if offset == len(text) and text and not text.endswith("\n"):
            block = "\n" + block.removesuffix("\n")
        new_text = text[:offset] + block + text[offset:]
        self._save(target, text, new_text)
        first = insert_line + 1
        return self._edited(target, new_text, first, insert_line + len(split_lines(new_str)))

    def undo_edit(self, path: str) -> str:
        target = resolve(self.sandbox.workdir, path)
        stack = self._history.get(target)
        if not stack:
            raise CallError(
                f"there is no edit of {shown_path(target)} to undo: undo_edit reverts the "
                "create, str_replace and insert calls of this episode, not bash commands."
            )
        before = stack.pop()
        if before is None:
            remove(self.sandbox, target)
            return f"Undid the creation of {shown_path(target)}: the file is removed."
        write_bytes(self.sandbox, target, before)
        return f"Last edit to {shown_path(target)} undone. " + self.view(target)

    # -- helpers ------------------------------------------------------------------------------

    def _load(self, path: str) -> tuple[str, str]:
        target = resolve(self.sandbox.workdir, path)
        info = probe(self.sandbox, target)
        return target, decode(self._read(target, info.kind, info.size))

    def _read(self, target: str, kind: str, size: int | None) -> bytes:
        where = shown_path(target)
        if kind == "missing":
            parent = posixpath.dirname(target)
            raise CallError(
                f"{where} does not exist. Check the path (view {shown_path(parent)} lists that "
                "folder); to make a new file, use create."
            )
        if kind == "dir":
            raise CallError(f"{where} is a folder, not a file.")
        if kind != "file":
            raise CallError(f"{where} is not a regular file (a device, socket or broken link).")
        if size is not None and size > self.max_file_bytes:
            raise CallError(
                f"{where} is {size:,} bytes, over the {self.max_file_bytes:,} the file tools "
                f"handle. Use bash, e.g. `sed -n 1,50p {shlex.quote(target)}` or grep -n."
            )
        data = read_bytes(self.sandbox, target)
        if len(data) > self.max_file_bytes:
            raise CallError(
                f"{where} is {len(data):,} bytes, over the {self.max_file_bytes:,} "
                "the file tools handle. Use bash (sed -n, grep -n) instead."
            )
        return data

    def _save(self, target: str, old_text: str, new_text: str) -> None:
        data = encode(new_text, "the edited text (new_str)")
        write_bytes(self.sandbox, target, data)
        self._remember(target, encode(old_text, "the file"))

    def _remember(self, target: str, before: bytes | None) -> None:
        stack = self._history.setdefault(target, [])
        stack.append(before)
        del stack[: -self.history_depth]

    def _edited(self, target: str, text: str, first: int, last: int) -> str:
        lines = split_lines(printable(text))
        start = max(1, first - SNIPPET_CONTEXT)
        end = min(len(lines), last + SNIPPET_CONTEXT)
        rows, _ = self._fit(f"{i:6}\t{lines[i - 1]}\n" for i in range(start, end + 1))
        body = "".join(rows)
        if len(rows) < end - start + 1:
            body += "[snippet cut; view the file to see the rest]\n"
        return (
            f"The file {shown_path(target)} has been edited. Here's the result of running "
            f"`cat -n` on a snippet of it:\n{body}{_EDITED_NOTE}"
        )


def _check_range(view_range: list[int] | None, n_lines: int) -> tuple[int, int]:
    if view_range is None:
        return 1, n_lines
    start, end = view_range
    if start < 1:
        raise CallError(f"view_range {view_range}: lines are numbered from 1.")
    if start > n_lines:
        raise CallError(
            f"view_range {view_range} starts past the end: the file has {n_lines} lines."
        )
    if end == -1:
        return start, n_lines
    if end < start:
        raise CallError(f"view_range {view_range}: end must be >= start, or -1 for the end.")
    return start, min(end, n_lines)


def _occurrences(text: str, needle: str) -> list[int]:
    """Every start of ``needle`` in ``text``, overlapping ones included: "aa" in "aaa" is
    ambiguous, and str.count would call it unique."""
    found: list[int] = []
    i = text.find(needle)
    while i >= 0 and len(found) < 1000:
        found.append(i)
        i = text.find(needle, i + 1)
    return found


def _line_offset(text: str, line: int) -> int:
    """Where line ``line + 1`` starts (the end of the text if ``line`` is the last one)."""
    offset = 0
    for _ in range(line):
        nl = text.find("\n", offset)
        if nl < 0:
            return len(text)
        offset = nl + 1
    return offset
