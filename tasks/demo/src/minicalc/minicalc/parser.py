"""A Pratt (precedence-climbing) parser from tokens to a syntax tree."""

from __future__ import annotations

from minicalc.errors import CalcSyntaxError
from minicalc.nodes import Assign, Binary, Call, Name, Node, Number, Unary
from minicalc.tokens import Token, TokenKind, tokenize

__all__ = ["BINARY_PRECEDENCE", "UNARY_PRECEDENCE", "Parser", "parse"]

# Higher binds tighter.
BINARY_PRECEDENCE = {"+": 10, "-": 10, "*": 20, "/": 20, "//": 20, "%": 20, "**": 30}
UNARY_PRECEDENCE = 40


def parse(text: str, *, allow_assignment: bool = False) -> Node:
    """Parses one expression (or, with ``allow_assignment``, ``name = expression``)."""
    return Parser(text).parse(allow_assignment=allow_assignment)


class Parser:
    """Parses the tokens of one input. Use :func:`parse` unless you need the tokens too."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.index = 0

    @property
    def current(self) -> Token:
        return self.tokens[self.index]

    def advance(self) -> Token:
        token = self.current
        if token.kind is not TokenKind.END:
            self.index += 1
        return token

    def error(self, message: str, token: Token | None = None) -> CalcSyntaxError:
        token = token or self.current
        return CalcSyntaxError(message, self.text, token.position)

    def expect(self, kind: TokenKind, what: str) -> Token:
        if self.current.kind is not kind:
            raise self.error(f"expected {what}, found {self.current.describe()}")
        return self.advance()

    def parse(self, *, allow_assignment: bool = False) -> Node:
        if self.current.kind is TokenKind.END:
            raise self.error("empty expression")
        if allow_assignment and self._at_assignment():
            target = self.advance().text
            self.advance()  # the "="
            node: Node = Assign(target, self.expression(0))
        else:
            node = self.expression(0)
        if self.current.kind is not TokenKind.END:
            raise self.error(f"unexpected {self.current.describe()}")
        return node

    def _at_assignment(self) -> bool:
        following = self.tokens[self.index + 1] if self.index + 1 < len(self.tokens) else None
        return (
            self.current.kind is TokenKind.NAME
            and following is not None
            and following.kind is TokenKind.OPERATOR
            and following.text == "="
        )

    def expression(self, min_precedence: int) -> Node:
        """Parses operators that bind at least as tightly as ``min_precedence``."""
        left = self.prefix()
        while True:
            token = self.current
            precedence = BINARY_PRECEDENCE.get(token.text, -1)
            if token.kind is not TokenKind.OPERATOR or precedence < min_precedence:
                return left
            self.advance()
            right = self.expression(precedence + 1)
            left = Binary(token.text, left, right)

    def prefix(self) -> Node:
        token = self.advance()
        if token.kind is TokenKind.NUMBER:
            return Number(_number(token.text))
        if token.kind is TokenKind.NAME:
            if self.current.kind is TokenKind.LPAREN:
                return Call(token.text, self.arguments())
            return Name(token.text)
        if token.kind is TokenKind.OPERATOR and token.text in ("+", "-"):
            return Unary(token.text, self.expression(UNARY_PRECEDENCE))
        if token.kind is TokenKind.LPAREN:
            inner = self.expression(0)
            self.expect(TokenKind.RPAREN, "')'")
            return inner
        if token.kind is TokenKind.END:
            raise self.error("unexpected end of input", token)
        raise self.error(f"unexpected {token.describe()}", token)

    def arguments(self) -> tuple[Node, ...]:
        self.expect(TokenKind.LPAREN, "'('")
        arguments: list[Node] = []
        if self.current.kind is not TokenKind.RPAREN:
            arguments.append(self.expression(0))
            while self.current.kind is TokenKind.COMMA:
                self.advance()
                arguments.append(self.expression(0))
        self.expect(TokenKind.RPAREN, "',' or ')'")
        return tuple(arguments)


def _number(text: str) -> int | float:
    # Integers stay exact; anything with a point or an exponent is a float.
    if text.isdigit():
        return int(text)
    return float(text)
