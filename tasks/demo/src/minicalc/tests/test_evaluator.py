import math

import pytest
from minicalc import EvalError, UndefinedNameError, evaluate


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("10 - 4 - 3", 3),
        ("7 / 2", 3.5),
        ("7 // 2", 3),
        ("-7 // 2", -4),
        ("7 % 3", 1),
        ("2 ** 10", 1024),
        ("2 ** -1", 0.5),
        ("-3 * -2", 6),
        ("+4", 4),
    ],
    ids=lambda value: str(value).replace(" ", ""),
)
def test_arithmetic(expression, value):
    assert evaluate(expression) == value


def test_integers_stay_integers():
    assert isinstance(evaluate("2 ** 100"), int)
    assert evaluate("2 ** 100") == 1267650600228229401496703205376


def test_variables_and_constants():
    assert evaluate("2 * x + 1", {"x": 20}) == 41
    assert evaluate("pi") == math.pi
    assert evaluate("e", {"e": 3}) == 3


def test_functions():
    assert evaluate("sqrt(16)") == 4.0
    assert evaluate("max(3, 9, 4) - min(3, 9, 4)") == 6
    assert evaluate("round(2.567, 2)") == 2.57
    assert evaluate("hypot(3, 4)") == 5.0
    assert evaluate("log(8, 2)") == pytest.approx(3.0)
    assert evaluate("floor(2.5) + ceil(2.5)") == 5


def test_undefined_names():
    with pytest.raises(UndefinedNameError, match="undefined name 'y'"):
        evaluate("y + 1")
    with pytest.raises(UndefinedNameError, match="undefined name 'nope'"):
        evaluate("nope(1)")


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("sqrt(1, 2)", "sqrt() takes 1 argument, got 2"),
        ("hypot(1)", "hypot() takes at least 2 arguments, got 1"),
        ("round()", "round() takes 1 to 2 arguments, got 0"),
    ],
    ids=["too-many", "too-few", "range"],
)
def test_arity_errors(expression, message):
    with pytest.raises(EvalError) as caught:
        evaluate(expression)
    assert str(caught.value) == message


def test_division_by_zero():
    with pytest.raises(EvalError, match="division by zero"):
        evaluate("1 / 0")
    with pytest.raises(EvalError, match="division by zero"):
        evaluate("1 / (2 - 2.0)")


def test_domain_and_size_errors():
    with pytest.raises(EvalError, match="sqrt"):
        evaluate("sqrt(-1)")
    with pytest.raises(EvalError, match="too large"):
        evaluate("exp(1000)")
    with pytest.raises(EvalError, match="digits"):
        evaluate("10 ** 100000")
    with pytest.raises(EvalError, match="complex"):
        evaluate("(-8) ** 0.5")
