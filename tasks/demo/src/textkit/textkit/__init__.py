"""textkit: small, dependency-free helpers for everyday text work."""

from textkit.case import (
    split_words,
    title_case,
    to_camel,
    to_constant,
    to_kebab,
    to_pascal,
    to_snake,
)
from textkit.slug import slugify, transliterate, unique_slug
from textkit.stats import (
    TextStats,
    count_syllables,
    flesch_reading_ease,
    reading_time,
    summarize,
    word_count,
    word_frequencies,
)
from textkit.tokens import Kind, Token, split_sentences, tokenize, words
from textkit.wrap import fill, indent_lines, truncate, wrap

__version__ = "0.4.1"

__all__ = [
    "Kind",
    "TextStats",
    "Token",
    "count_syllables",
    "fill",
    "flesch_reading_ease",
    "indent_lines",
    "reading_time",
    "slugify",
    "split_sentences",
    "split_words",
    "summarize",
    "title_case",
    "to_camel",
    "to_constant",
    "to_kebab",
    "to_pascal",
    "to_snake",
    "tokenize",
    "transliterate",
    "truncate",
    "unique_slug",
    "word_count",
    "word_frequencies",
    "words",
    "wrap",
]
