"""Conversions between identifier styles (snake_case, camelCase, ...) and title case."""

from __future__ import annotations

import re
from collections.abc import Collection

from textkit.tokens import Kind, tokenize

__all__ = [
    "SMALL_WORDS",
    "split_words",
    "title_case",
    "to_camel",
    "to_constant",
    "to_kebab",
    "to_pascal",
    "to_snake",
]

# Inside one alphanumeric run: a capitalised word, an all-caps run, or a number.
_PART = re.compile(r"[A-Z]?[a-z]+|[A-Z]+|\d+")
_SEPARATORS = re.compile(r"[^A-Za-z0-9]+")

# Words that stay lower case inside a title (AP and Chicago styles agree on these).
SMALL_WORDS = frozenset(
    {"a", "an", "and", "as", "at", "but", "by", "for", "in", "nor", "of", "on", "or", "the",
     "to", "up", "via"}
)


def split_words(identifier: str) -> list[str]:
    """Splits an identifier in any common style into its words, keeping their case.

    >>> split_words("parseResponseBody")
    ['parse', 'Response', 'Body']
    >>> split_words("user_id-v2")
    ['user', 'id', 'v', '2']
    """
    parts: list[str] = []
    for chunk in _SEPARATORS.split(identifier):
        parts.extend(_PART.findall(chunk))
    return parts


def to_snake(identifier: str) -> str:
    """``"parseResponseBody"`` -> ``"parse_response_body"``."""
    return "_".join(word.lower() for word in split_words(identifier))


def to_kebab(identifier: str) -> str:
    """``"parseResponseBody"`` -> ``"parse-response-body"``."""
    return "-".join(word.lower() for word in split_words(identifier))


def to_constant(identifier: str) -> str:
    """``"parseResponseBody"`` -> ``"PARSE_RESPONSE_BODY"``."""
    return "_".join(word.upper() for word in split_words(identifier))


def to_pascal(identifier: str) -> str:
    """``"parse_response_body"`` -> ``"ParseResponseBody"``."""
    return "".join(word.capitalize() for word in split_words(identifier))


def to_camel(identifier: str) -> str:
    """``"parse_response_body"`` -> ``"parseResponseBody"``."""
    pascal = to_pascal(identifier)
    return pascal[:1].lower() + pascal[1:]


def title_case(text: str, small_words: Collection[str] = SMALL_WORDS) -> str:
    """Capitalises every word of ``text`` except small words inside the title.

    The first and the last word are always capitalised. Words written with more than one
    capital letter ("iPhone", "NASA") are kept as they are. Spacing and punctuation are
    preserved.

    >>> title_case("the lord of the rings")
    'The Lord of the Rings'
    """
    tokens = tokenize(text)
    word_positions = [i for i, token in enumerate(tokens) if token.kind is Kind.WORD]
    if not word_positions:
        return text
    first, last = word_positions[0], word_positions[-1]
    out = [token.text for token in tokens]
    for i in word_positions:
        word = tokens[i].text
        if any(ch.isupper() for ch in word[1:]):
            continue  # "iPhone", "NASA", "McDonald": the author chose this spelling
        if word.lower() in small_words and i not in (first, last):
            out[i] = word.lower()
        else:
            out[i] = word[0].upper() + word[1:]
    return "".join(out)
