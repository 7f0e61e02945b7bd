import pytest
from minicalc import Session, UndefinedNameError


def test_assignments_persist():
    session = Session()
    assert session.run("rate = 0.25") == 0.25
    assert session.run("price = 80") == 80
    assert session.run("price * (1 + rate)") == 100.0


def test_ans_is_the_last_result():
    session = Session()
    session.run("6 * 7")
    assert session.run("ans + 1") == 43
    assert session.run("ans * 2") == 86


def test_initial_variables_and_history():
    session = Session({"x": 2})
    session.run("x + 1")
    session.run("y = x * 10")
    assert session.history == [("x + 1", 3), ("y = x * 10", 20)]
    assert session.variables["y"] == 20


def test_failed_line_changes_nothing():
    session = Session()
    session.run("a = 1")
    with pytest.raises(UndefinedNameError):
        session.run("b = missing + 1")
    assert "b" not in session.variables
    assert session.variables["ans"] == 1
