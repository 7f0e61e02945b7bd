"""A small repository with an issue of two parts, for the gold-case tests: quantities written
with thousands separators do not parse (the gold patch fixes a helper the tests never call),
and stock names are not normalised (it fixes a method)."""

from __future__ import annotations

import difflib
import textwrap
from pathlib import Path

CORE = textwrap.dedent('''\
    """Stock keeping."""
    import functools


    def logged(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            return fn(*args, **kwargs)
        return wrapper


    def _clean(text):
        return text.strip()


    def parse_qty(text):
        """A quantity from text: '3', ' 12 ', '1,200'."""
        cleaned = _clean(text)
        if not cleaned:
            raise ValueError("empty quantity")
        return int(cleaned)


    class Stock:
        def __init__(self):
            self.items = {}

        def add(self, name, qty):
            self.items[name] = self.items.get(name, 0) + qty
            return self.items[name]

        def remove(self, name, qty):
            have = self.items.get(name, 0)
            if qty > have:
                raise ValueError(f"only {have} {name}")
            self.items[name] = have - qty
            return self.items[name]


    @logged
    def total_of(stock):
        return sum(stock.items.values())
    ''')

FIXED_CLEAN = CORE.replace("    return text.strip()\n",
                           '    return text.strip().replace(",", "")\n')
GOLD = FIXED_CLEAN.replace("    def add(self, name, qty):\n",
                           "    def add(self, name, qty):\n        name = name.strip().lower()\n")
# the same fix, made in the function the tests call instead of the helper the gold patch edits
ELSEWHERE = GOLD.replace('    return text.strip().replace(",", "")\n', "    return text.strip()\n"
                         ).replace("    cleaned = _clean(text)\n",
                                   '    cleaned = _clean(text).replace(",", "")\n')

INIT = "from .core import Stock, parse_qty, total_of\n"

TESTS = textwrap.dedent('''\
    import pytest
    from inv import Stock, parse_qty, total_of


    def test_plain():
        assert parse_qty(" 12 ") == 12


    def test_empty():
        with pytest.raises(ValueError):
            parse_qty("  ")


    def test_remove():
        stock = Stock()
        stock.add("bolt", 5)
        assert stock.remove("bolt", 2) == 3
        with pytest.raises(ValueError):
            stock.remove("bolt", 9)


    def test_total():
        stock = Stock()
        stock.add("a", 1)
        stock.add("b", 2)
        assert total_of(stock) == 3
    ''')

HIDDEN_TESTS = textwrap.dedent('''\
    import pytest
    from inv import Stock, parse_qty


    @pytest.mark.parametrize("text, qty", [("1,200", 1200), (" 3,000 ", 3000), ("12", 12)],
                             ids=["thousands", "padded", "plain"])
    def test_separators(text, qty):
        assert parse_qty(text) == qty


    def test_names_are_normalised():
        stock = Stock()
        stock.add(" Bolt ", 2)
        assert stock.add("bolt", 1) == 3
        assert stock.items == {"bolt": 3}
    ''')

F2P = ("tests/test_fix.py::test_separators[thousands]",
       "tests/test_fix.py::test_separators[padded]", "tests/test_fix.py::test_names_are_normalised")
P2P = ("tests/test_core.py::test_plain", "tests/test_core.py::test_empty",
       "tests/test_core.py::test_remove", "tests/test_core.py::test_total",
       "tests/test_fix.py::test_separators[plain]")


def unified(path: str, before: str, after: str) -> str:
    """A git-style diff of one file (``before`` empty: a new file)."""
    lines = difflib.unified_diff(before.splitlines(True), after.splitlines(True),
                                 "/dev/null" if not before else f"a/{path}", f"b/{path}")
    mode = "new file mode 100644\n" if not before else ""
    return f"diff --git a/{path} b/{path}\n{mode}" + "".join(lines)


def write_repo(root: Path) -> Path:
    for name, text in {"inv/__init__.py": INIT, "inv/core.py": CORE,
                       "tests/test_core.py": TESTS}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root

# a test that calls the package millions of times (more-itertools' prime-number tests: 125 s
# under the gold cases' tracer): the traced run must end at its time budget
SLOW_TESTS = """\
import time
from inv import parse_qty


def test_a_million_calls():
    end = time.monotonic() + 600
    while time.monotonic() < end:
        assert parse_qty("7") == 7
"""
