from minicalc import CalcError, CalcSyntaxError, EvalError, UndefinedNameError


def test_hierarchy():
    assert issubclass(CalcSyntaxError, CalcError)
    assert issubclass(EvalError, CalcError)
    assert issubclass(UndefinedNameError, EvalError)


def test_syntax_error_fields():
    error = CalcSyntaxError("unexpected character '$'", "1 + $", 4)
    assert error.message == "unexpected character '$'"
    assert error.text == "1 + $"
    assert error.column == 5
    assert str(error) == "unexpected character '$' (column 5)"


def test_pretty_shows_input_and_message():
    lines = CalcSyntaxError("bad", "1 + $", 4).pretty().splitlines()
    assert lines[0] == "1 + $"
    assert lines[1].strip() == "^"
    assert lines[2] == "bad"


def test_undefined_name_keeps_the_name():
    error = UndefinedNameError("radius")
    assert error.name == "radius"
    assert str(error) == "undefined name 'radius'"
