"""AST mutation operators and the synthetic source's candidate generation."""

from __future__ import annotations

import ast
import textwrap

import pytest

from repogym.tasks.sources import mutate, pyast
from repogym.tasks.sources.synthetic import (
    SyntheticOptions,
    failure_statement,
    failure_summary,
    mutations,
)

MODULE = textwrap.dedent('''\
    """A module with one function per kind of site, and neighbours that must not change."""
    import functools

    LIMIT = 10  # module level: never mutated


    def before(x):
        return x < LIMIT


    def target(items, low, high, flag=True):
        """Docstring with 1 < 2 inside: never mutated."""
        total = 0
        if not items:
            return 0
        for i in range(len(items)):
            if items[i] > low and items[i] <= high:
                total += items[i]
        label = f"{total > 1}"
        result = max(total, low)
        sink = []
        sink.append(label)
        return result if flag else -1


    class Box:
        def after(self, y):
            return y == 3 or y is None
    ''')

# what each operator must find in ``target`` at least once: (original text, replacement)
EXPECTED = {
    "flip_comparison": ("items[i] > low", "items[i] >= low"),
    "flip_boolean": ("items[i] > low and items[i] <= high",
                     "items[i] > low or items[i] <= high"),
    "off_by_one": ("len(items)", "len(items) - 1"),
    "swap_arguments": ("total, low", "low, total"),
    "drop_statement": ("    sink.append(label)\n", ""),
    "change_constant": ("0", "1"),
    "invert_condition": ("not items", "items"),
    "remove_early_return": ("    if not items:\n        return 0\n", ""),
}


def _target_mutations(operators: tuple[str, ...]) -> list[mutate.Mutation]:
    module = ast.parse(MODULE)
    definition = next(d for d in pyast.definitions(module) if d.qualname == "target")
    return mutate.function_mutations("m.py", MODULE, definition, operators)


def _others(text: str) -> list[str]:
    """Every definition except ``target``, and every module-level statement, as AST dumps."""
    module = ast.parse(text)
    dumps = [ast.dump(d.node) for d in pyast.definitions(module) if d.qualname != "target"]
    return dumps + [ast.dump(n) for n in module.body if not isinstance(n, ast.FunctionDef)]


@pytest.mark.parametrize("operator", list(mutate.OPERATORS))
def test_each_operator_changes_only_its_function(operator: str) -> None:
    found = _target_mutations((operator,))
    assert found, f"{operator} found no site in target()"
    pairs = {(MODULE[m.start:m.end], m.replacement) for m in found}
    assert EXPECTED[operator] in pairs
    span = pyast.Source(MODULE)
    fn = pyast.find(ast.parse(MODULE), "target")
    start, end = span.start(fn), span.end(fn)
    for m in found:
        new = mutate.verify(MODULE, m)
        assert new is not None, m
        compile(new, "m.py", "exec")
        assert start <= m.start <= m.end <= end
        # byte-identical outside the edit, which lies inside the function
        assert new[: m.start] == MODULE[: m.start]
        assert new[m.start + len(m.replacement):] == MODULE[m.end:]
        assert _others(new) == _others(MODULE)
        new_fn = pyast.find(ast.parse(new), "target")
        assert ast.dump(new_fn) != ast.dump(fn)


def test_docstrings_and_fstrings_are_left_alone() -> None:
    for m in _target_mutations(tuple(mutate.OPERATORS)):
        assert "1 < 2" not in MODULE[m.start:m.end]
        assert "total > 1" not in MODULE[m.start:m.end] or m.operator == "drop_statement"


def test_verify_rejects_a_mutation_that_does_not_parse_as_intended() -> None:
    good = _target_mutations(("flip_comparison",))[0]
    broken = mutate.Mutation(good.file, good.qualname, good.occurrence, good.operator,
                             good.start, good.end, "(", good.line, good.expected)
    assert mutate.verify(MODULE, broken) is None
    wrong = mutate.Mutation(good.file, good.qualname, good.occurrence, good.operator,
                            good.start, good.end, "x == 1", good.line, good.expected)
    assert mutate.verify(MODULE, wrong) is None


def test_precedence_is_kept_with_parentheses() -> None:
    text = "def f(a, b, c):\n    return a + b if c else a\n"
    definition = pyast.definitions(ast.parse(text))[0]
    found = mutate.function_mutations("f.py", text, definition, ("invert_condition",))
    (m,) = found
    assert mutate.verify(text, m) == "def f(a, b, c):\n    return a + b if not c else a\n"
    text = "def g(a, b):\n    while a or b:\n        a -= 1\n"
    definition = pyast.definitions(ast.parse(text))[0]
    (m,) = mutate.function_mutations("g.py", text, definition, ("invert_condition",))
    assert mutate.verify(text, m) == "def g(a, b):\n    while not (a or b):\n        a -= 1\n"


def test_overloads_and_setters_are_told_apart() -> None:
    text = textwrap.dedent("""\
        class C:
            @property
            def v(self):
                return self._v + 1

            @v.setter
            def v(self, value):
                self._v = value - 1
        """)
    module = ast.parse(text)
    setter = [d for d in pyast.definitions(module) if d.qualname == "C.v"][1]
    assert setter.occurrence == 1
    found = mutate.function_mutations("c.py", text, setter, ("change_constant",))
    (m,) = found
    new = mutate.verify(text, m)
    assert new is not None and "value - 0" in new and "self._v + 1" in new


def test_mutation_order_is_deterministic_for_a_seed() -> None:
    files = {"m.py": MODULE}
    ops = tuple(mutate.OPERATORS)
    first = mutations(files, ops, seed=3)
    assert first == mutations(files, ops, seed=3)
    assert [m.key for m in first] != [m.key for m in mutations(files, ops, seed=4)]
    # one mutation per function per round: the first three come from three functions
    assert len({m.qualname for m in first[:3]}) == 3
    priority = mutations(files, ops, seed=3, priority={"after"})
    assert priority[0].qualname == "Box.after"


def test_operators_take_turns_within_a_function() -> None:
    calls = "\n".join(f"    out = f(a{i}, b{i}, out)" for i in range(8))
    text = f"def busy(a0, b0, out, n):\n    if n > 3:\n        return 0\n{calls}\n    return out\n"
    found = mutations({"b.py": text}, ("swap_arguments", "flip_comparison"), seed=0)
    assert len([m for m in found if m.operator == "swap_arguments"]) >= 8
    assert {m.operator for m in found[:2]} == {"swap_arguments", "flip_comparison"}


def test_options_name_the_valid_operators() -> None:
    with pytest.raises(ValueError, match="flip_comparison"):
        SyntheticOptions(path=__import__("pathlib").Path("."), operators=("nope",))


def test_failure_summary_keeps_only_the_failing_tests() -> None:
    log = ("PASSED tests/test_a.py::test_ok\n"
           "FAILED tests/test_a.py::test_mean - assert 2.5 == 2\n"
           "FAILED tests/test_zz.py::test_canary - AssertionError\n")
    summary = failure_summary(log, ("tests/test_a.py::test_mean",))
    assert summary == "FAILED tests/test_a.py::test_mean - assert 2.5 == 2"


def test_failure_summary_gives_whole_messages_not_pytests_cut_ones() -> None:
    log = ("_______________________________ TestK.test_b[1] ________________________________\n"
           "\n    def test_b(self, x):\n>       raise ValueError('a rather long message')\n"
           "E       ValueError: a rather long message about what went wrong in the computation\n"
           "\ntests/test_x.py:7: ValueError\n"
           "=========================== short test summary info ============================\n"
           "FAILED tests/test_x.py::TestK::test_b[1] - ValueError: a rather long message ...\n"
           "FAILED tests/test_x.py::test_c - AssertionError: the expected value and the Assert"
           "ionE...\n")
    summary = failure_summary(log, ("tests/test_x.py::TestK::test_b[1]",
                                    "tests/test_x.py::test_c"))
    assert summary.splitlines() == [
        "FAILED tests/test_x.py::TestK::test_b[1] - ValueError: a rather long message about "
        "what went wrong in the computation",
        "FAILED tests/test_x.py::test_c - AssertionError: the expected value and the ..."]
    text = failure_statement(("tests/test_x.py::test_c",), {}, "x" * 5000 + "\nlast line")
    assert "x" * 10 not in text and "last line" in text  # the cut falls between lines


def test_failure_statement_shows_the_tests_not_the_fix() -> None:
    files = {"tests/test_a.py": "import m\n\n\nclass TestM:\n    def test_mean(self, n):\n"
                                "        assert m.mean([1, 2]) == 1.5\n"}
    text = failure_statement(("tests/test_a.py::TestM::test_mean[3]",), files,
                             "FAILED tests/test_a.py::TestM::test_mean[3] - assert 1 == 1.5")
    assert "`tests/test_a.py::TestM::test_mean[3]`" in text
    assert "assert m.mean([1, 2]) == 1.5" in text
    assert "assert 1 == 1.5" in text
