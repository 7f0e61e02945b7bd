import pytest
from textkit import indent_lines, truncate


def test_truncate_keeps_whole_words():
    assert truncate("Hello brave new world", 16) == "Hello brave..."


def test_truncate_returns_short_text_collapsed():
    assert truncate("  short\n text ", 20) == "short text"


def test_truncate_cuts_a_long_first_word():
    assert truncate("Supercalifragilistic", 10) == "Superca..."


def test_truncate_custom_placeholder():
    assert truncate("one two three four", 12, placeholder=" [more]") == "one [more]"


def test_truncate_rejects_too_short_length():
    with pytest.raises(ValueError):
        truncate("anything", 2)


def test_indent_lines_skips_blank_lines():
    assert indent_lines("a\n\nb\n", "> ") == "> a\n\n> b\n"


def test_indent_lines_with_predicate():
    text = "keep\n# comment\n"
    assert indent_lines(text, "    ", lambda line: line.startswith("#")) == "keep\n    # comment\n"
