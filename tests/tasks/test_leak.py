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

from repogym.repo import snapshot_commit
from repogym.schema import Task
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


def test_the_repositorys_own_files_are_context_not_copies(tmp_path: Path) -> None:
    """A function like the gold one in a file the repository holds is what the agent is
    meant to read; the same file elsewhere (a build folder, an archive) is a copy."""
    from repogym.tasks.sources.leak import owned_files

    golds = gold_functions(REPLICATION_PATCH, {"pkg/iters.py": STUBBED}, LeakConfig())
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "iters.py").write_text(STUBBED)
    (root / "pkg" / "compat.py").write_text(OTHER_SPELLING)
    task = Task(instance_id="i-1", repo="t/i", base_commit=snapshot_commit(root),
                problem_statement="x", patch=REPLICATION_PATCH, source=str(root))
    owned = owned_files(task)
    assert owned == {"/testbed/pkg/iters.py", "/testbed/pkg/compat.py"}
    files = {"/testbed/pkg/compat.py": OTHER_SPELLING.encode(),
             "/testbed/build/lib/pkg/compat.py": OTHER_SPELLING.encode()}
    found = {c.path for c in find_copies(golds, files, LeakConfig(), owned)}
    assert found == {"/testbed/build/lib/pkg/compat.py"}
    assert owned_files(task.with_(source=None)) == frozenset()


def test_bad_thresholds_say_what_to_give() -> None:
    with pytest.raises(ValueError, match="near=1.5"):
        LeakConfig(near=1.5)


# --- in Docker ---------------------------------------------------------------------------------


@pytest.mark.docker
def test_an_image_holding_a_near_copy_rejects_the_candidate(tmp_path: Path) -> None:
    """Copies outside the repository's own files count (an archive the setup wrote, a build
    folder's copy); the same code in a file the repository holds is context, not a leak
    (isodate's ``Duration.__ne__`` was rejected for its own ``__eq__``)."""
    from repogym.schema import Environment
    from repogym.tasks.sources.deriver import default_deriver

    root = tmp_path / f"iters-{uuid.uuid4().hex[:6]}"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "iters.py").write_text(STUBBED)
    (root / "pkg" / "compat.py").write_text(OTHER_SPELLING)  # the repository's own
    (root / "legacy").mkdir()
    (root / "legacy" / "iters.txt").write_text(OTHER_SPELLING)  # no Python file: not read
    setup = ("python -c \"import zipfile; z = zipfile.ZipFile('/opt/old.zip', 'w'); "
             "z.writestr('oldpkg/iters.py', open('legacy/iters.txt').read()); z.close()\" "
             "&& chmod 644 /opt/old.zip "
             "&& mkdir -p build/lib/pkg && cp pkg/compat.py build/lib/pkg/compat.py")
    task = Task(instance_id="iters-1", repo="test/iters", base_commit=snapshot_commit(root),
                problem_statement="x", patch=REPLICATION_PATCH, source=str(root), kind="swe",
                environment=Environment(setup=(setup,)))
    copies = copies_in_image(task)
    assert {(c.path, c.qualname) for c in copies} == {
        *(("/opt/old.zip!oldpkg/iters.py", name) for name in ("drain", "exhaust", "runs_of")),
        *(("/testbed/build/lib/pkg/compat.py", name)
          for name in ("drain", "exhaust", "runs_of"))}
    # the sources' deriver turns it down before any test runs
    done, reason = default_deriver(1)(task)
    assert done is None and reason.startswith("leak: the image already holds the gold code")


TOOL = textwrap.dedent('''\
    #!/usr/bin/env python
    """Prints rows as a table."""
    import sys


    def render(rows, sep=" | "):
        """The rows as lines of cells padded to each column's width."""
        widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
        lines = []
        for row in rows:
            cells = [str(cell).ljust(width) for cell, width in zip(row, widths)]
            lines.append(sep.join(cells).rstrip())
        return "\\n".join(lines)


    if __name__ == "__main__":
        print(render([line.split() for line in sys.stdin if line.strip()]))
    ''')


@pytest.mark.docker
def test_a_script_the_install_copies_is_a_link_to_the_repositorys_file(tmp_path: Path) -> None:
    """jmespath 1.0.1: ``setup.py``'s ``scripts=['bin/jp.py']`` copied the script into
    /opt/venv/bin, so the snapshot's image held the gold code of every candidate that changed
    it (two rejected as leaks). The copy is now a link to the repository's file."""
    import subprocess

    from repogym.images.repository import ensure_image
    from repogym.sandbox.client import docker_client
    from repogym.schema import Environment
    from repogym.tasks.checking import Checker

    root = tmp_path / f"tool-{uuid.uuid4().hex[:6]}"
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "tool.py").write_text(TOOL)
    (root / "bin" / "tool.py").chmod(0o755)
    (root / "setup.py").write_text("from setuptools import setup\n\nsetup(name='tool', "
                                   "version='0.1', py_modules=[], scripts=['bin/tool.py'])\n")

    def commit(message: str) -> str:
        git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
        subprocess.run([*git, "add", "-A"], cwd=root, check=True)
        subprocess.run([*git, "commit", "-qm", message], cwd=root, check=True)
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, check=True,
                              capture_output=True, text=True).stdout.strip()

    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    original = commit("tool")
    stub = TOOL[TOOL.index("    widths"):TOOL.index("\n\nif __name__")] + "\n"
    (root / "bin" / "tool.py").write_text(TOOL.replace(stub, "    raise NotImplementedError\n"))
    removed = commit("render removed")
    patch = subprocess.run(["git", "diff", removed, original], cwd=root, check=True,
                           capture_output=True, text=True).stdout
    env = Environment(setup=("python -m pip install -e .",))
    snapshot = Task(instance_id="tool-1", repo="test/tool", base_commit=original,
                    problem_statement="x", source=str(root), environment=env)
    image = ensure_image(snapshot, progress=lambda _m: None).tag
    out = docker_client().containers.run(image, ["bash", "-c", "readlink /opt/venv/bin/tool.py; "
                                                 "echo 'a b' | /opt/venv/bin/tool.py; echo $?"],
                                         remove=True).decode()
    assert out.split() == ["/testbed/bin/tool.py", "a", "|", "b", "0"], out
    task = snapshot.with_(base_commit=removed, patch=patch, kind="replication")
    with Checker() as checker:
        assert checker.leak(task, image) is None


def test_a_name_many_modules_define_is_no_copy_by_name_alone() -> None:
    """sphinx-doc__sphinx-8273: the fix adds an ``add_config_value`` call to a builder's
    ``setup``; every installed sphinxcontrib package has a ``setup`` made of such calls, and
    each came out closer to the fixed ``setup`` than to the unfixed one ("same name", 0.67). A
    name that many other files define is a convention; one namesake alone is still evidence."""
    def setup(values: int, extra: str = "") -> str:
        calls = "".join(f"    app.add_config_value('opt{i}', None, 'env')\n"
                        for i in range(values))
        return (f"def setup(app):\n    app.setup_extension('pkg.builders')\n{calls}{extra}"
                "    return {'version': 'builtin', 'parallel_read_safe': True}\n")

    broken = "from pkg.builders import Builder\n\n\n" + setup(2)
    fixed = "from pkg.builders import Builder\n\n\n" + setup(
        2, "    app.add_config_value('man_make_section_directory', False, None)\n")
    golds = gold_functions(_stub_patch("pkg/builders/man.py", broken, fixed),
                           {"pkg/builders/man.py": broken}, LeakConfig())
    assert [g.fixed.qualname for g in golds] == ["setup"]
    plugins = {f"/opt/venv/lib/python3.9/site-packages/contrib/{name}/__init__.py":
               setup(3).encode() for name in ("applehelp", "devhelp", "htmlhelp", "jsmath")}
    one = dict(list(plugins.items())[:1])
    assert [c.rule for c in find_copies(golds, one, LeakConfig())] == ["same name"]
    assert find_copies(golds, plugins, LeakConfig()) == []
    # the same text as the fix is a copy whatever its name's fame
    exact = {**plugins, "/opt/venv/lib/python3.9/site-packages/old/man.py": fixed.encode()}
    assert [c.rule for c in find_copies(golds, exact, LeakConfig())] == ["exact"]


# pytest-9359: the fix adds a loop over decorators to get_statement_startend2; the `py`
# library, installed beside it, holds an older relative of the function without the loop
STARTEND = '''\
import ast
from bisect import bisect_right


def get_statement_startend2(lineno, node):
    values = []
    for x in ast.walk(node):
        if isinstance(x, (ast.stmt, ast.ExceptHandler)):
            values.append(x.lineno - 1)
            for name in ("finalbody", "orelse"):
                val = getattr(x, name, None)
                if val:
                    values.append(val[0].lineno - 1 - 1)
    values.sort()
    insert_index = bisect_right(values, lineno)
    start = values[insert_index - 1]
    if insert_index >= len(values):
        end = None
    else:
        end = values[insert_index]
    return start, end
'''
STARTEND_FIXED = STARTEND.replace('''\
            values.append(x.lineno - 1)
''', '''\
            if isinstance(x, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                for d in x.decorator_list:
                    values.append(d.lineno - 1)
            values.append(x.lineno - 1)
''')
STARTEND_RELATIVE = '''\
def get_statement_startend2(lineno, node):
    import ast
    l = []
    for x in ast.walk(node):
        if isinstance(x, _ast.stmt) or isinstance(x, _ast.ExceptHandler):
            l.append(x.lineno - 1)
            for name in "finalbody", "orelse":
                val = getattr(x, name, None)
                if val:
                    l.append(val[0].lineno - 1 - 1)
    l.sort()
    insert_index = bisect_right(l, lineno)
    start = l[insert_index - 1]
    if insert_index >= len(l):
        end = None
    else:
        end = l[insert_index]
    return start, end
'''


def test_a_relative_without_the_fix_is_no_leak_however_its_locals_are_numbered() -> None:
    path = "src/_pytest/_code/source.py"
    golds = gold_functions(_stub_patch(path, STARTEND, STARTEND_FIXED), {path: STARTEND},
                           LeakConfig())
    gold = golds[0]
    relative = functions(STARTEND_RELATIVE)[0]
    # closer to the fixed function than to the unfixed one, by the numbers of its locals
    assert similarity(gold.fixed.tokens, relative.tokens) > similarity(
        gold.broken.tokens, relative.tokens)
    site = "/opt/venv/lib/python3.9/site-packages"
    assert find_copies(golds, {f"{site}/py/_code/source.py": STARTEND_RELATIVE.encode()},
                       LeakConfig()) == []
    # the relative with the fix is one, locals renamed or not
    fixed_relative = STARTEND_RELATIVE.replace('''\
            l.append(x.lineno - 1)
''', '''\
            if isinstance(x, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                for dec in x.decorator_list:
                    l.append(dec.lineno - 1)
            l.append(x.lineno - 1)
''')
    found = find_copies(golds, {f"{site}/py/_code/source.py": fixed_relative.encode(),
                                f"{site}/vendored/source.py": STARTEND_FIXED.encode()},
                        LeakConfig())
    assert {(c.path, c.rule) for c in found} == {(f"{site}/py/_code/source.py", "same name"),
                                                 (f"{site}/vendored/source.py", "exact")}


# sympy-16106: mathml.py's apply_patch defines two nested functions named writexml; the fix
# adds methods elsewhere in the file and changes neither
TWICE = '''\
def apply_patch():
    def writexml(self, writer, indent="", addindent="", newl=""):
        writer.write(indent + "<" + self.tagName)
        for name in sorted(self.attributes.keys()):
            writer.write(" %s=" % name)
        writer.write(newl)

    def writexml(self, writer, indent="", addindent="", newl=""):
        data = escape(self.data)
        if data:
            writer.write("%s%s%s" % (indent, data, newl))
        return data


def untouched(values, scale):
    out = []
    for value in values:
        out.append(value * scale + len(out) - 1)
    return out
'''


def test_a_name_defined_twice_is_gold_only_where_the_patch_changed_it() -> None:
    path = "pkg/printing.py"
    added = TWICE + '''

def print_tuple(items, printer):
    element = printer.create("mfenced")
    for item in items:
        element.append(printer.render(item, scale=2))
    return element
'''
    golds = gold_functions(_stub_patch(path, TWICE, added), {path: TWICE}, LeakConfig())
    assert [g.fixed.qualname for g in golds] == ["print_tuple"]
    # and the one that changes is gold, against its own former self
    changed = TWICE.replace("return data", "return data.strip()")
    golds = gold_functions(_stub_patch(path, TWICE, changed), {path: TWICE}, LeakConfig())
    assert [g.fixed.qualname for g in golds] == ["apply_patch", "apply_patch.<locals>.writexml"]
    second = [f for f in functions(TWICE) if f.qualname == "apply_patch.<locals>.writexml"][1]
    assert golds[1].broken is not None and golds[1].broken.tokens == second.tokens
