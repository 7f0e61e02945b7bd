import pytest
from minicalc import CalcSyntaxError, parse
from minicalc.nodes import Assign, Binary, Call, Name, Number, to_source


@pytest.mark.parametrize(
    ("expression", "tree"),
    [
        ("1 + 2 * 3", "(1 + (2 * 3))"),
        ("(1 + 2) * 3", "((1 + 2) * 3)"),
        ("1 - 2 - 3", "((1 - 2) - 3)"),
        ("8 / 4 / 2", "((8 / 4) / 2)"),
        ("7 // 2 % 3", "((7 // 2) % 3)"),
        ("2 * x ** 2", "(2 * (x ** 2))"),
        ("-x + 1", "((-x) + 1)"),
        ("--1", "(-(-1))"),
        ("max(1, y, 3)", "max(1, y, 3)"),
        ("f()", "f()"),
    ],
    ids=lambda value: str(value).replace(" ", ""),
)
def test_structure(expression, tree):
    assert to_source(parse(expression)) == tree


def test_nodes():
    assert parse("sqrt(2) + a") == Binary("+", Call("sqrt", (Number(2),)), Name("a"))


def test_numbers_keep_integers_exact():
    assert parse("12") == Number(12)
    assert parse("12.0") == Number(12.0)
    assert isinstance(parse("1e3"), Number) and parse("1e3").value == 1000.0


def test_assignment_only_when_allowed():
    assert parse("x = 1 + 2", allow_assignment=True) == Assign(
        "x", Binary("+", Number(1), Number(2))
    )
    with pytest.raises(CalcSyntaxError, match="unexpected operator '='"):
        parse("x = 1")


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("", "empty expression"),
        ("1 +", "unexpected end of input"),
        ("(1 + 2", "expected ')', found end of input"),
        ("max(1 2)", "expected ',' or ')', found number '2'"),
        ("* 2", "unexpected operator '*'"),
        ("1 + 2)", "unexpected ')'"),
    ],
    ids=["empty", "dangling-operator", "unclosed", "missing-comma", "leading-operator",
         "extra-paren"],
)
def test_syntax_errors(expression, message):
    with pytest.raises(CalcSyntaxError) as caught:
        parse(expression)
    assert caught.value.message == message
