"""Token rewrites in other languages, found with tree-sitter's grammars."""

from __future__ import annotations

import pytest

from repogym.tasks.sources import mutate_ts

GO = """package clamp

// Clamp limits x to [lo, hi].
func Clamp(x, lo, hi int) int {
\tif x < lo {
\t\treturn lo
\t}
\treturn min(x, hi) + 0
}

func (r *Range) Empty() bool { return r.lo == r.hi && false }
"""
RUST = """pub fn limit(x: u32) -> bool { x > 3 }

#[cfg(test)]
mod tests {
    #[test]
    fn limits() { assert!(super::limit(4) == true); }
}
"""
JS = """'use strict';
const join = (a, b) => a + '-' + b;
function within(x, lo, hi) { return x >= lo || x <= hi; }
module.exports = { join, within };
"""


def sites(language: str, text: str) -> list[mutate_ts.Mutation]:
    return [m for f in mutate_ts.function_mutations(language, "f", text) for m in f]


def test_go_sites_and_names() -> None:
    found = sites("go", GO)
    assert {(m.qualname, m.operator, m.old, m.new) for m in found} == {
        ("Clamp", "flip_comparison", "<", "<="), ("Clamp", "swap_arithmetic", "+", "-"),
        ("Clamp", "off_by_one", "0", "1"), ("Range.Empty", "flip_comparison", "==", "!="),
        ("Range.Empty", "swap_boolean_operator", "&&", "||"),
        ("Range.Empty", "negate_boolean", "false", "true")}
    edit = next(m for m in found if m.old == "<")
    assert mutate_ts.verify("go", GO, edit) == GO.replace("x < lo", "x <= lo")


def test_rust_tests_beside_the_code_are_left_alone() -> None:
    assert [(m.qualname, m.old) for m in sites("rust", RUST)] == [("limit", ">"), ("limit", "3")]


def test_js_string_joins_are_not_subtracted() -> None:
    found = sites("javascript", JS)
    assert {(m.qualname, m.old) for m in found} == {("within", ">="), ("within", "||"),
                                                    ("within", "<=")}


def test_verify_refuses_a_stale_or_broken_edit() -> None:
    edit = next(m for m in sites("go", GO) if m.old == "<")
    assert mutate_ts.verify("go", GO.replace("x < lo", "x > lo"), edit) is None
    broken = mutate_ts.Mutation(**{**edit.__dict__, "new": "<<<"})
    assert mutate_ts.verify("go", GO, broken) is None


def test_unknown_language() -> None:
    with pytest.raises(ValueError, match="no grammar"):
        mutate_ts.parser("cobol")
