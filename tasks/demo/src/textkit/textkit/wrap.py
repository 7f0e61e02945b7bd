"""Line wrapping, truncation and indentation for plain text."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["fill", "indent_lines", "truncate", "wrap"]


def wrap(
    text: str,
    width: int = 70,
    *,
    indent: str = "",
    subsequent_indent: str | None = None,
    break_long_words: bool = True,
) -> list[str]:
    """Wraps ``text`` into lines of at most ``width`` characters.

    The text is treated as one paragraph: it is split into words at any whitespace (runs of
    spaces, tabs and newlines all count as one break) and the words are laid out greedily,
    joined by single spaces, each line holding as many words as fit.

    The first line starts with ``indent`` and every later line with ``subsequent_indent``
    (which defaults to ``indent``); the prefix counts towards ``width``. Lines never end with
    whitespace. Text with no words gives an empty list.

    A word that does not fit on the current line starts the next line. A word that is longer
    than a whole line (``width`` minus that line's prefix) starts on a fresh line and, when
    ``break_long_words`` is true, is cut into pieces that each fill a whole line; the last piece
    continues like a normal word (later words may follow it on its line). When
    ``break_long_words`` is false such a word stays whole on a line of its own, overflowing
    ``width``.

    Raises ``ValueError`` when ``indent`` or ``subsequent_indent`` leave no room for text, i.e.
    when either is at least ``width`` characters long.

    >>> wrap("The quick brown fox jumps over the lazy dog", 15)
    ['The quick brown', 'fox jumps over', 'the lazy dog']
    >>> wrap("a b c d", 5, indent="* ", subsequent_indent="  ")
    ['* a b', '  c d']
    """
    raise NotImplementedError


def fill(
    text: str,
    width: int = 70,
    *,
    indent: str = "",
    subsequent_indent: str | None = None,
    break_long_words: bool = True,
) -> str:
    """Like :func:`wrap`, but returns one string with the lines joined by newlines."""
    lines = wrap(
        text,
        width,
        indent=indent,
        subsequent_indent=subsequent_indent,
        break_long_words=break_long_words,
    )
    return "\n".join(lines)


def truncate(text: str, length: int, placeholder: str = "...") -> str:
    """Shortens ``text`` to at most ``length`` characters, ending with ``placeholder``.

    Whitespace is collapsed first. Text that already fits is returned collapsed but otherwise
    unchanged. Otherwise as many whole words as fit are kept, followed by ``placeholder``; when
    not even the first word fits, it is cut inside the word.

    >>> truncate("Hello brave new world", 16)
    'Hello brave...'
    """
    if length < len(placeholder):
        raise ValueError(
            f"length={length} is shorter than the placeholder {placeholder!r}"
        )
    collapsed = " ".join(text.split())
    if len(collapsed) <= length:
        return collapsed
    room = length - len(placeholder)
    kept = collapsed[: room + 1].rsplit(" ", 1)[0] if " " in collapsed[: room + 1] else ""
    if not kept:
        kept = collapsed[:room]
    return kept.rstrip() + placeholder


def indent_lines(
    text: str, prefix: str, predicate: Callable[[str], bool] | None = None
) -> str:
    """Adds ``prefix`` to the start of the lines of ``text`` selected by ``predicate``.

    By default every line that is not blank gets the prefix; line endings are preserved.
    """
    selected = predicate or _has_text
    return "".join(
        prefix + line if selected(line) else line for line in text.splitlines(keepends=True)
    )


def _has_text(line: str) -> bool:
    return bool(line.strip())
