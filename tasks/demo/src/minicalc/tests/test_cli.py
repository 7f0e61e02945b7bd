import io

from minicalc.cli import main


def run(argv=None, stdin=""):
    out = io.StringIO()
    status = main(argv if argv is not None else [], io.StringIO(stdin), out)
    return status, out.getvalue()


def test_syntax_error_is_reported():
    status, output = run(["1 +"])
    assert status == 1
    lines = output.splitlines()
    assert lines[0] == "error: unexpected end of input (column 4)"
    assert lines[1] == "    1 +"
    assert lines[2].strip() == "^"


def test_evaluation_error_is_reported():
    status, output = run(["sqrt(1, 2)"])
    assert status == 1
    assert output == "error: sqrt() takes 1 argument, got 2\n"


def test_blank_lines_are_skipped():
    status, output = run(stdin="\n   \n")
    assert (status, output) == (0, "")
