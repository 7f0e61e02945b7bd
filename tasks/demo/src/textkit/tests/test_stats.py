import pytest
from textkit import (
    count_syllables,
    flesch_reading_ease,
    reading_time,
    summarize,
    word_count,
    word_frequencies,
)


def test_word_count():
    assert word_count("Three small words.") == 3
    assert word_count("  ") == 0
    assert word_count("Chapter 12: the end") == 3


def test_word_frequencies():
    text = "the cat and the hat and The bat"
    assert word_frequencies(text) == [("the", 3), ("and", 2), ("bat", 1), ("cat", 1), ("hat", 1)]
    assert word_frequencies(text, top=2) == [("the", 3), ("and", 2)]
    assert ("The", 1) in word_frequencies(text, ignore_case=False)


@pytest.mark.parametrize(
    ("word", "syllables"),
    [("cat", 1), ("make", 1), ("table", 2), ("water", 2), ("beautiful", 3), ("free", 1),
     ("rhythm", 1), ("", 0)],
)
def test_count_syllables(word, syllables):
    assert count_syllables(word) == syllables


def test_flesch_reading_ease():
    easy = flesch_reading_ease("The cat sat on the mat. It was happy.")
    hard = flesch_reading_ease(
        "Institutional considerations necessitate comprehensive organizational restructuring."
    )
    assert easy > 90
    assert hard < 0
    assert flesch_reading_ease("") == 0.0


def test_reading_time_rounds_up():
    assert reading_time("word " * 230) == 1
    assert reading_time("word " * 231) == 2
    assert reading_time("") == 0
    with pytest.raises(ValueError):
        reading_time("text", words_per_minute=0)


def test_summarize():
    stats = summarize("One two three. Four five.")
    assert stats.words == 5
    assert stats.sentences == 2
    assert stats.characters == 25
    assert stats.average_word_length == 3.8
