import pytest
from minicalc import CalcSyntaxError, TokenKind, tokenize


def kinds_and_texts(text):
    return [(token.kind, token.text) for token in tokenize(text)]


def test_simple_expression():
    assert kinds_and_texts("2*(x+1)") == [
        (TokenKind.NUMBER, "2"),
        (TokenKind.OPERATOR, "*"),
        (TokenKind.LPAREN, "("),
        (TokenKind.NAME, "x"),
        (TokenKind.OPERATOR, "+"),
        (TokenKind.NUMBER, "1"),
        (TokenKind.RPAREN, ")"),
        (TokenKind.END, ""),
    ]


@pytest.mark.parametrize("number", ["42", "3.5", ".5", "7.", "1e3", "2.5E-4", "6e+2"])
def test_number_forms(number):
    assert kinds_and_texts(number)[0] == (TokenKind.NUMBER, number)


def test_two_character_operators_are_one_token():
    assert [t.text for t in tokenize("a**b//c")][:5] == ["a", "**", "b", "//", "c"]


def test_whitespace_is_skipped():
    assert [t.text for t in tokenize("  max( 1 ,\t2 ) ")] == ["max", "(", "1", ",", "2", ")", ""]


def test_operator_positions():
    tokens = tokenize("(1 + 2) * 3")
    assert [(t.text, t.position) for t in tokens if t.kind is not TokenKind.NUMBER] == [
        ("(", 0), ("+", 3), (")", 6), ("*", 8), ("", 11)
    ]


def test_unknown_character():
    with pytest.raises(CalcSyntaxError) as caught:
        tokenize("1 + $")
    assert caught.value.message == "unexpected character '$'"
    assert caught.value.position == 4
