"""Turns an expression into tokens."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from minicalc.errors import CalcSyntaxError

__all__ = ["OPERATORS", "Token", "TokenKind", "tokenize"]


class TokenKind(Enum):
    NUMBER = "number"
    NAME = "name"
    OPERATOR = "operator"
    LPAREN = "("
    RPAREN = ")"
    COMMA = ","
    END = "end"


@dataclass(frozen=True)
class Token:
    """One token. ``position`` is the 0-based offset of its first character in the input."""

    kind: TokenKind
    text: str
    position: int

    def describe(self) -> str:
        """How error messages refer to this token."""
        if self.kind is TokenKind.END:
            return "end of input"
        return f"{self.kind.value} {self.text!r}" if self.kind in _NAMED else repr(self.text)


_NAMED = (TokenKind.NUMBER, TokenKind.NAME, TokenKind.OPERATOR)

# Longest first, so that "**" is not read as two "*".
OPERATORS = ("**", "//", "+", "-", "*", "/", "%", "=")
_PUNCTUATION = {"(": TokenKind.LPAREN, ")": TokenKind.RPAREN, ",": TokenKind.COMMA}
_NUMBER = re.compile(r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def tokenize(text: str) -> list[Token]:
    """The tokens of ``text``, always ending with one ``END`` token.

    Raises :class:`CalcSyntaxError` at the first character that starts no token.

    >>> [token.text for token in tokenize("2*(x+1)")]
    ['2', '*', '(', 'x', '+', '1', ')', '']
    """
    tokens: list[Token] = []
    position = 0
    while position < len(text):
        char = text[position]
        if char.isspace():
            position += 1
            continue
        token = _read_token(text, position)
        if token is None:
            raise CalcSyntaxError(f"unexpected character {char!r}", text, position)
        tokens.append(token)
        position += len(token.text)
    tokens.append(Token(TokenKind.END, "", len(text)))
    return tokens


def _read_token(text: str, position: int) -> Token | None:
    for pattern, kind in ((_NUMBER, TokenKind.NUMBER), (_NAME, TokenKind.NAME)):
        match = pattern.match(text, position)
        if match:
            return Token(kind, match.group(), match.end())
    char = text[position]
    if char in _PUNCTUATION:
        return Token(_PUNCTUATION[char], char, position)
    for operator in OPERATORS:
        if text.startswith(operator, position):
            return Token(TokenKind.OPERATOR, operator, position)
    return None
