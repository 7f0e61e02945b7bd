"""The leak check: near-copies of the gold code (another spelling, renamed locals, another
name, inside an archive) are found; unrelated functions, and copies of the unfixed code, are
not. In Docker: an image holding such copies rejects the candidate before its tests run."""

from __future__ import annotations

import io
import textwrap
import uuid
import zipfile
from pathlib import Path

import pytest

from repogym.tasks.repo import snapshot_commit
from repogym.tasks.schema import Task
from repogym.tasks.sources.leak import LeakConfig, copies_in_image, find_copies, gold_functions
from repogym.tasks.sources.normast import functions, similarity

GOLD = textwrap.dedent('''\
    import operator
    from contextlib import suppress
    from itertools import groupby


    def drain(call, errors, before=None):
        """Calls ``call`` until it raises one of ``errors``."""
        with suppress(errors):
            if before is not None:
                yield before()
            while True:
                yield call()


    def runs_of(items, key=None):
        """The first item of each run of equal items."""
        if key is None:
            return map(operator.itemgetter(0), groupby(items))
        return map(next, map(operator.itemgetter(1), groupby(items, key)))
    ''')

# the same functions as another release might spell them
OTHER_SPELLING = textwrap.dedent('''\
    from itertools import groupby
    from operator import itemgetter


    def drain(fn, exc, first=None):
        # older style: no contextlib
        try:
            if first is not None:
                yield first()
            while 1:
                yield fn()
        except exc:
            pass


    def runs_of(iterable, key=None):
        return map(next, map(itemgetter(1), groupby(iterable, key)))


    def exhaust(f, e, pre=None):
        """Renamed, reformatted, same code."""
        with suppress(e):
            if pre is not None: yield pre()
            while True: yield f()
    ''')

UNRELATED = textwrap.dedent('''\
    def drain(queue, errors, before=None):
        """Same name, other work."""
        total = 0
        for job in queue.pending():
            total += job.weight * 2
            queue.mark(job, done=True)
        return total
    ''')


def _stub_patch(path: str, before: str, after: str) -> str:
    import difflib

    lines = difflib.unified_diff(before.splitlines(True), after.splitlines(True),
                                 f"a/{path}", f"b/{path}")
    return f"diff --git a/{path} b/{path}\n" + "".join(lines)


STUBBED = GOLD.replace('''    with suppress(errors):
        if before is not None:
            yield before()
        while True:
            yield call()
''', "    raise NotImplementedError\n").replace('''    if key is None:
        return map(operator.itemgetter(0), groupby(items))
    return map(next, map(operator.itemgetter(1), groupby(items, key)))
''', "    raise NotImplementedError\n")
REPLICATION_PATCH = _stub_patch("pkg/iters.py", STUBBED, GOLD)


def test_spellings_of_one_function_stay_alike() -> None:
    gold = {f.qualname: f for f in functions(GOLD)}
    other = {f.qualname: f for f in functions(OTHER_SPELLING)}
    assert other["exhaust"].tokens == gold["drain"].tokens  # names and layout normalised away
    assert similarity(gold["drain"].tokens, other["drain"].tokens) > 0.7
    assert similarity(gold["runs_of"].tokens, other["runs_of"].tokens) > 0.6
    unrelated = functions(UNRELATED)[0]
    assert similarity(gold["drain"].tokens, unrelated.tokens) < 0.5


def test_the_gold_functions_are_what_the_patch_writes() -> None:
    golds = gold_functions(REPLICATION_PATCH, {"pkg/iters.py": STUBBED}, LeakConfig())
    assert [(g.file, g.fixed.qualname, g.broken is not None) for g in golds] == [
        ("pkg/iters.py", "drain", True), ("pkg/iters.py", "runs_of", True)]
    assert gold_functions("", {}, LeakConfig()) == []


def test_near_copies_are_found_and_strangers_are_not() -> None:
    golds = gold_functions(REPLICATION_PATCH, {"pkg/iters.py": STUBBED}, LeakConfig())
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("vendored/iters.py", OTHER_SPELLING)
    files = {
        "/usr/lib/python3/dist-packages/pkg/iters.py": OTHER_SPELLING.encode(),
        "/opt/venv/lib/python3.11/site-packages/jobs.py": UNRELATED.encode(),
        "/testbed/pkg/iters.py": STUBBED.encode(),
    }
    found = {(c.path, c.qualname): c.rule for c in find_copies(golds, files, LeakConfig())}
    assert found == {
        ("/usr/lib/python3/dist-packages/pkg/iters.py", "exhaust"): "exact",
        ("/usr/lib/python3/dist-packages/pkg/iters.py", "drain"): "same name",
        ("/usr/lib/python3/dist-packages/pkg/iters.py", "runs_of"): "same name",
    }
    from repogym.tasks.sources.leak import _archived

    zipped = dict(_archived("/x/bundle.whl", archive.getvalue()))
    found = {c.path for c in find_copies(golds, zipped, LeakConfig())}
    assert found == {"/x/bundle.whl!vendored/iters.py"}


def test_a_copy_of_the_unfixed_code_is_no_leak() -> None:
    broken = GOLD.replace("while True:\n            yield call()", "yield call()")
    patch = _stub_patch("pkg/iters.py", broken, GOLD)
    golds = gold_functions(patch, {"pkg/iters.py": broken}, LeakConfig())
    assert [g.fixed.qualname for g in golds] == ["drain"]
    installed = {"/opt/venv/lib/python3.11/site-packages/pkg/iters.py": broken.encode()}
    assert find_copies(golds, installed, LeakConfig()) == []
    fixed = {"/usr/lib/python3/dist-packages/pkg/iters.py": GOLD.encode()}
    assert [c.rule for c in find_copies(golds, fixed, LeakConfig())] == ["exact"]


def test_bad_thresholds_say_what_to_give() -> None:
    with pytest.raises(ValueError, match="near=1.5"):
        LeakConfig(near=1.5)


# --- in Docker ---------------------------------------------------------------------------------


@pytest.mark.docker
def test_an_image_holding_a_near_copy_rejects_the_candidate(tmp_path: Path) -> None:
    from repogym.tasks.sources.common import default_deriver

    root = tmp_path / f"iters-{uuid.uuid4().hex[:6]}"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "iters.py").write_text(STUBBED)
    (root / "legacy").mkdir()
    archive = root / "legacy" / "old.zip"
    with zipfile.ZipFile(archive, "w") as z:  # an old release, importable from the zip
        z.writestr("oldpkg/iters.py", OTHER_SPELLING)
    task = Task(instance_id="iters-1", repo="test/iters", base_commit=snapshot_commit(root),
                problem_statement="x", patch=REPLICATION_PATCH, source=str(root), kind="swe")
    copies = copies_in_image(task)
    assert {(c.path, c.qualname) for c in copies} == {
        ("/testbed/legacy/old.zip!oldpkg/iters.py", name)
        for name in ("drain", "exhaust", "runs_of")}
    # the sources' deriver turns it down before any test runs
    done, reason = default_deriver(1)(task)
    assert done is None and reason.startswith("leak: the image already holds the gold code")
