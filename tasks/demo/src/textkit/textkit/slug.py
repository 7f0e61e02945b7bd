"""URL slugs: short, readable, ASCII-only identifiers made from titles."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection, Iterable

__all__ = ["slugify", "transliterate", "unique_slug"]

# Letters that Unicode normalization does not decompose into ASCII.
_SPECIAL = {
    "ß": "ss", "æ": "ae", "Æ": "AE", "œ": "oe", "Œ": "OE", "ø": "o", "Ø": "O",
    "ł": "l", "Ł": "L", "đ": "d", "Đ": "D", "þ": "th", "Þ": "TH",
}
_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]+")


def transliterate(text: str) -> str:
    """Replaces accented and special Latin letters with their closest ASCII spelling.

    Characters that have no ASCII spelling (CJK, emoji, ...) are dropped.

    >>> transliterate("Crème brûlée à Łódź")
    'Creme brulee a Lodz'
    """
    text = "".join(_SPECIAL.get(ch, ch) for ch in text)
    decomposed = unicodedata.normalize("NFKD", text)
    return decomposed.encode("ascii", "ignore").decode("ascii")


def slugify(
    text: str,
    separator: str = "-",
    *,
    max_length: int | None = None,
    lowercase: bool = True,
    stopwords: Iterable[str] = (),
) -> str:
    """Makes a URL slug from ``text``.

    Letters are transliterated to ASCII, every run of other characters becomes one
    ``separator``, and the slug never starts or ends with a separator. ``stopwords`` are
    dropped (compared case-insensitively). With ``max_length``, the slug is cut at a word
    boundary so that it is no longer than ``max_length`` characters; a single word longer than
    that is cut inside the word.

    >>> slugify("Hello, World!")
    'hello-world'
    >>> slugify("The Art of War", stopwords={"the", "of"})
    'art-war'
    """
    if not separator:
        raise ValueError("separator must be a non-empty string")
    if max_length is not None and max_length < 1:
        raise ValueError(f"max_length must be at least 1, got {max_length}")
    ascii_text = transliterate(text)
    if lowercase:
        ascii_text = ascii_text.lower()
    dropped = {word.lower() for word in stopwords}
    parts = [part for part in _NOT_ALNUM.split(ascii_text) if part.lower() not in dropped]
    slug = separator.join(parts).strip("-")
    if max_length is not None:
        slug = _shorten(slug, separator, max_length)
    return slug


def _shorten(slug: str, separator: str, max_length: int) -> str:
    if len(slug) <= max_length:
        return slug
    cut = slug[: max_length + len(separator)]
    boundary = cut.rfind(separator)
    if boundary > 0:
        return cut[:boundary]
    return slug[:max_length]


def unique_slug(
    text: str,
    existing: Collection[str],
    separator: str = "-",
    *,
    max_length: int | None = None,
) -> str:
    """A slug for ``text`` that is not in ``existing``: ``title``, ``title-2``, ``title-3``...

    ``max_length`` applies to the slug before the number is appended.
    """
    base = slugify(text, separator, max_length=max_length)
    if base not in existing:
        return base
    number = 2
    while f"{base}{separator}{number}" in existing:
        number += 1
    return f"{base}{separator}{number}"
