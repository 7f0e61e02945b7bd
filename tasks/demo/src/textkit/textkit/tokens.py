"""A small word tokenizer and a sentence splitter.

The tokenizer never drops a character: joining the text of every token gives back the input,
which makes it safe to use for transformations that must preserve punctuation and spacing
(see ``textkit.case.title_case``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

__all__ = ["ABBREVIATIONS", "Kind", "Token", "split_sentences", "tokenize", "words"]


class Kind(str, Enum):
    """The kind of a token."""

    WORD = "word"
    NUMBER = "number"
    SPACE = "space"
    PUNCT = "punct"


@dataclass(frozen=True)
class Token:
    """One token: its kind, its text and the offset of its first character in the input."""

    kind: Kind
    text: str
    start: int

    @property
    def end(self) -> int:
        """The offset just past the token's last character."""
        return self.start + len(self.text)


# Letters only: digits and underscores are not part of words.
_WORD = r"[^\W\d_]+"
# "3", "3.14", "1,000,000": a separator only counts when a digit follows it.
_NUMBER = r"\d+(?:[.,]\d+)*"
_PATTERN = re.compile(
    rf"(?P<word>{_WORD})|(?P<number>{_NUMBER})|(?P<space>\s+)|(?P<punct>.)",
    re.DOTALL,
)

# Words that end with a period without ending the sentence (compared in lower case).
ABBREVIATIONS = frozenset(
    {"mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "fig", "no", "vol", "approx"}
)
_SENTENCE_END = frozenset(".!?")
_CLOSING = frozenset("\"')]»”’")


def tokenize(text: str) -> list[Token]:
    """Splits ``text`` into word, number, space and punctuation tokens.

    >>> [t.text for t in tokenize("Hi, 2 you!")]
    ['Hi', ',', ' ', '2', ' ', 'you', '!']
    """
    tokens = []
    for match in _PATTERN.finditer(text):
        kind = Kind(match.lastgroup)
        tokens.append(Token(kind, match.group(), match.start()))
    return tokens


def words(text: str) -> list[str]:
    """The words of ``text``, in order, as written (numbers are not words)."""
    return [token.text for token in tokenize(text) if token.kind is Kind.WORD]


def split_sentences(text: str) -> list[str]:
    """Splits ``text`` into sentences, each stripped of surrounding whitespace.

    A sentence ends at ``.``, ``!`` or ``?`` (and any closing quotes or brackets right after it)
    when whitespace follows. A period after a known abbreviation ("Dr.", "vs.") does not end a
    sentence.

    >>> split_sentences("It rained. We stayed in! Did you?")
    ['It rained.', 'We stayed in!', 'Did you?']
    """
    tokens = tokenize(text)
    sentences: list[str] = []
    start = 0
    for i, token in enumerate(tokens):
        if token.kind is not Kind.PUNCT or token.text not in _SENTENCE_END:
            continue
        end = i + 1
        while end < len(tokens) and tokens[end].text in _CLOSING:
            end += 1
        if end < len(tokens) and tokens[end].kind is not Kind.SPACE:
            continue
        if token.text == "." and _is_abbreviation(tokens, i):
            continue
        sentence = "".join(t.text for t in tokens[start:end]).strip()
        if sentence:
            sentences.append(sentence)
        start = end
    rest = "".join(t.text for t in tokens[start:]).strip()
    if rest:
        sentences.append(rest)
    return sentences


def _is_abbreviation(tokens: list[Token], period: int) -> bool:
    """Whether the period at ``tokens[period]`` closes an abbreviation such as "Dr."."""
    if period == 0:
        return False
    previous = tokens[period - 1]
    return previous.kind is Kind.WORD and previous.text in ABBREVIATIONS
