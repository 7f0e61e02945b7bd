"""Replication: body removal, the specification, deterministic candidates."""

from __future__ import annotations

import ast
import subprocess
import textwrap
from pathlib import Path

from repogym.repo import export_tree
from repogym.schema import Environment
from repogym.tasks.sources.common import SourceOptions, WorkRepo
from repogym.tasks.sources.replication import (
    ReplicationOptions,
    ReplicationSource,
    Target,
    find_targets,
    reference,
    remove_body,
    specification,
)

OPS = textwrap.dedent('''\
    """Arithmetic helpers."""
    import functools


    @functools.lru_cache(maxsize=None)
    def clamp(x: int,
              low: int,
              high: int) -> int:
        """Clamp ``x`` into [low, high].

        Values below ``low`` give ``low``.
        """
        if x < low:
            return low
        return min(x, high)


    def mean(values):
        if not values:
            return 0
        return sum(values) / len(values)


    def stub():
        """Abstract."""
        raise NotImplementedError


    class Counter:
        """Counts things."""

        def __init__(self, start=0):
            self.count = start

        def bump(self, by=1):
            """Adds ``by``."""
            self.count += by
            return self.count

        def double(self): return self.count * 2
    ''')

TESTS = textwrap.dedent('''\
    from calc.ops import Counter, clamp, mean


    def test_clamp():
        assert clamp(5, 0, 3) == 3
        assert clamp(-1, 0, 3) == 0


    def test_mean():
        assert mean([1, 2, 3]) == 2


    def test_counter():
        assert Counter(1).bump(2) == 3
    ''')


def write_calc(root: Path) -> Path:
    (root / "calc").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "calc" / "__init__.py").write_text("")
    (root / "calc" / "ops.py").write_text(OPS)
    (root / "tests" / "test_ops.py").write_text(TESTS)
    return root


def test_body_removal_keeps_signature_decorators_and_docstring() -> None:
    new = remove_body(OPS, Target("calc/ops.py", "clamp", "function"))
    fn = next(n for n in ast.parse(new).body if isinstance(n, ast.FunctionDef)
              and n.name == "clamp")
    assert ast.get_docstring(fn) == ast.get_docstring(
        next(n for n in ast.parse(OPS).body if getattr(n, "name", "") == "clamp"))  # type: ignore
    assert [ast.unparse(s) for s in fn.body[1:]] == ["raise NotImplementedError"]
    assert "@functools.lru_cache(maxsize=None)\ndef clamp(x: int,\n          low: int," in new
    assert "if x < low" not in new and "min(x, high)" not in new
    # everything outside the body is byte-identical
    assert new.split("def clamp")[0] == OPS.split("def clamp")[0]
    assert new.split("def mean")[1] == OPS.split("def mean")[1]


def test_body_without_docstring_and_one_liners() -> None:
    new = remove_body(OPS, Target("calc/ops.py", "mean", "function"))
    assert "def mean(values):\n    raise NotImplementedError\n\n\ndef stub" in new
    new = remove_body(OPS, Target("calc/ops.py", "Counter.double", "function"))
    assert "    def double(self): raise NotImplementedError\n" in new
    compile(new, "ops.py", "exec")


def test_class_and_module_granularity() -> None:
    new = remove_body(OPS, Target("calc/ops.py", "Counter", "class"))
    assert new.count("raise NotImplementedError") == 4  # 3 methods + the existing stub
    assert '"""Adds ``by``."""' in new and "self.count += by" not in new
    assert "if x < low" in new  # other definitions untouched
    whole = remove_body(OPS, Target("calc/ops.py", "", "module"))
    compile(whole, "ops.py", "exec")
    assert whole.count("raise NotImplementedError") == 6
    assert "import functools" in whole and '"""Arithmetic helpers."""' in whole


def test_targets_skip_stubs_and_short_bodies() -> None:
    files = {"calc/ops.py": OPS}
    names = [t.qualname for t in find_targets(files, "function", min_lines=2)]
    assert names == ["clamp", "mean", "Counter.bump"]
    assert [t.qualname for t in find_targets(files, "class", 1)] == ["Counter"]
    assert [t.file for t in find_targets(files, "module", 1)] == ["calc/ops.py"]


def test_reference_is_the_removed_definition() -> None:
    ref = reference(OPS, Target("calc/ops.py", "Counter.bump", "function"))
    assert ref["source"] == ('def bump(self, by=1):\n    """Adds ``by``."""\n'
                             "    self.count += by\n    return self.count")
    assert ref["file"] == "calc/ops.py" and ref["qualname"] == "Counter.bump"


def test_specification_describes_without_the_code() -> None:
    files = {"calc/ops.py": OPS, "tests/test_ops.py": TESTS}
    text = specification(files, Target("calc/ops.py", "clamp", "function"))
    assert "`clamp` in `calc/ops.py` (module `calc.ops`)" in text
    assert "Values below ``low`` give ``low``." in text
    assert "tests/test_ops.py:5: assert clamp(5, 0, 3) == 3" in text
    assert "if x < low" not in text and "min(x, high)" not in text
    text = specification(files, Target("calc/ops.py", "Counter", "class"))
    assert "def bump(self, by=1):" in text and "self.count += by" not in text


def _source(work: WorkRepo, seed: int = 0, granularity: str = "function") -> ReplicationSource:
    options = ReplicationOptions(work.path, granularity=granularity, min_lines=2)
    return ReplicationSource(work, options, SourceOptions(seed=seed), Environment(),
                             derive=lambda t: (t, "ok"), log=lambda _m: None)


def test_candidates_are_deterministic_and_patches_restore(tmp_path: Path) -> None:
    work = WorkRepo.create(write_calc(tmp_path / "calc"), tmp_path / "work")
    first = list(_source(work, seed=5).candidates())
    again = list(_source(work, seed=5).candidates())
    assert [(t.instance_id, t.base_commit) for t in first] == \
        [(t.instance_id, t.base_commit) for t in again]
    assert {t.reference["qualname"] for t in first if t.reference} == \
        {"clamp", "mean", "Counter.bump"}
    task = first[0]
    assert task.kind == "replication" and task.test_patch == ""
    tree = tmp_path / "restored"
    export_tree(work.path, task.base_commit, tree)
    assert "raise NotImplementedError" in (tree / "calc" / "ops.py").read_text()
    subprocess.run(["git", "apply", "-"], cwd=tree, input=task.patch.encode(), check=True)
    assert (tree / "calc" / "ops.py").read_text() == OPS
