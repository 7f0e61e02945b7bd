import pytest
from textkit import Kind, split_sentences, tokenize, words


def test_tokens_cover_the_whole_text():
    text = "Hello, world! It's 3.14 o'clock\t(roughly)."
    assert "".join(token.text for token in tokenize(text)) == text


def test_token_kinds_and_offsets():
    tokens = tokenize("Pay 1,200 now!")
    assert [(t.kind, t.text, t.start) for t in tokens] == [
        (Kind.WORD, "Pay", 0),
        (Kind.SPACE, " ", 3),
        (Kind.NUMBER, "1,200", 4),
        (Kind.SPACE, " ", 9),
        (Kind.WORD, "now", 10),
        (Kind.PUNCT, "!", 13),
    ]
    assert tokens[2].end == 9


def test_trailing_separator_is_not_part_of_a_number():
    assert [t.text for t in tokenize("1, 2.")] == ["1", ",", " ", "2", "."]


def test_words_skip_numbers_and_punctuation():
    assert words("In 2024, déjà vu struck twice.") == ["In", "déjà", "vu", "struck", "twice"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("It rained. We stayed in! Did you?", ["It rained.", "We stayed in!", "Did you?"]),
        ("No final stop", ["No final stop"]),
        ('He said "stop." Then he left.', ['He said "stop."', "Then he left."]),
        ("Pi is 3.14 exactly. Not really.", ["Pi is 3.14 exactly.", "Not really."]),
        ("Ask prof. Smith about it. He knows.", ["Ask prof. Smith about it.", "He knows."]),
        ("Wait...what? Fine.", ["Wait...what?", "Fine."]),
        ("", []),
    ],
    ids=["basic", "no-stop", "quotes", "decimal", "abbreviation", "ellipsis", "empty"],
)
def test_split_sentences(text, expected):
    assert split_sentences(text) == expected
