"""Counts and readability scores for English prose."""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

from textkit.tokens import split_sentences, words

__all__ = [
    "TextStats",
    "count_syllables",
    "flesch_reading_ease",
    "reading_time",
    "summarize",
    "word_count",
    "word_frequencies",
]

_VOWEL_GROUPS = re.compile(r"[aeiouy]+")


def word_count(text: str) -> int:
    """The number of words in ``text`` (numbers and punctuation are not words)."""
    return len(words(text))


def word_frequencies(
    text: str, *, top: int | None = None, ignore_case: bool = True
) -> list[tuple[str, int]]:
    """``(word, count)`` pairs, most frequent first; ties in alphabetical order.

    With ``ignore_case`` (the default) words are counted and returned in lower case.
    """
    found = words(text)
    if ignore_case:
        found = [word.lower() for word in found]
    ranked = sorted(Counter(found).items(), key=lambda item: (-item[1], item[0]))
    return ranked if top is None else ranked[:top]


def count_syllables(word: str) -> int:
    """An estimate of the number of syllables of an English word (at least 1 for a word).

    Counts groups of vowels, then corrects for a silent final "e" ("make") and the
    syllabic "-le" ending ("table"). Good enough for readability scores, not for poetry.
    """
    letters = "".join(ch for ch in word.lower() if ch.isalpha())
    if not letters:
        return 0
    count = len(_VOWEL_GROUPS.findall(letters))
    if letters.endswith("e") and not letters.endswith(("le", "ee", "ye")) and count > 1:
        count -= 1
    elif letters.endswith("le") and len(letters) > 2 and letters[-3] not in "aeiouy":
        count = max(count, 2)
    return max(count, 1)


def flesch_reading_ease(text: str) -> float:
    """The Flesch reading-ease score of ``text``, rounded to one decimal.

    ``206.835 - 1.015 * words/sentences - 84.6 * syllables/words``: higher is easier; most
    plain English scores between 60 and 70. Text without words scores 0.0.
    """
    found = words(text)
    if not found:
        return 0.0
    sentences = max(len(split_sentences(text)), 1)
    syllables = sum(count_syllables(word) for word in found)
    score = 206.835 - 1.015 * len(found) / sentences - 84.6 * syllables / len(found)
    return round(score, 1)


def reading_time(text: str, words_per_minute: int = 230) -> int:
    """Whole minutes needed to read ``text`` at ``words_per_minute``, rounded up (0 for none)."""
    if words_per_minute <= 0:
        raise ValueError(f"words_per_minute must be positive, got {words_per_minute}")
    return math.ceil(word_count(text) / words_per_minute)


@dataclass(frozen=True)
class TextStats:
    """A summary of a text, as returned by :func:`summarize`."""

    characters: int
    words: int
    sentences: int
    average_word_length: float
    reading_ease: float
    reading_minutes: int


def summarize(text: str) -> TextStats:
    """All of this module's measures for ``text`` at once."""
    found = words(text)
    average = round(sum(len(word) for word in found) / len(found), 2) if found else 0.0
    return TextStats(
        characters=len(text),
        words=len(found),
        sentences=len(split_sentences(text)),
        average_word_length=average,
        reading_ease=flesch_reading_ease(text),
        reading_minutes=reading_time(text),
    )
