"""Hides which tests are the hidden ones. Runs inside the grading container, as root.

Called by ``plant.py`` (which the grader sends with the staging upload) after the test patch
and the canaries are in place; standard library only, Python 3.9 and later, like the planter.

For the test run: every test file the run names gets a new random name in its own folder,
from the same words as the canaries' names, and the run collects that copy instead. The file
at the original path stays as it was (other modules may import it), and is not collected.
Data that a test finds by its module's name (``baseline_images/test_x/``, ``test_x/`` next
to the file, ``__snapshots__/test_x.ambr``) gets a link under the new name.

For the decoy run that follows it: the original path of each file that holds a hidden test is
replaced (between the runs, by the grader) by a decoy: the original text in which every hidden
test fails once its body ran (a failing statement after its last one, its own code otherwise:
what it calls, how it fails, its decorators and parameters stay), with a few lines appended
that drop the other tests. The decoy run
collects the decoys under the hidden tests' own ids; a test process that forges a pass for
those ids makes a decoy pass, which no honest run can.

Prints nothing; ``apply`` returns the report the planter passes on to the host.
"""

from __future__ import annotations

import ast
import os
import random
import shutil
import sys
from typing import Any

DECOY_DIR = "/opt/repogym-grade/decoy"

FAIL = "_repogym_fail()"

# The decoys stand at the hidden tests' own paths from staging on, while the test run (which
# collects the renamed copies) goes on, so that the decoy run can collect at the same time. A
# module of the test run may import a decoy's module as a helper: there, with the test run's
# variable (``ENV_OFF``: its name and value come with the request, new for every grade) in the
# environment, the decoy is the original file (no test dropped, nothing failing).

# Appended to a decoy: drops every test that is not a hidden one (the decoy run has no use for
# them), and defines what makes a hidden test fail once its body ran. Python 3.5 syntax (it
# runs in the tests' interpreter); the dropping removes itself. Outside the decoy run (the
# test run's variable set) it drops nothing and nothing fails.
APPENDIX = '''


_repogym_decoy = __import__("os").environ.get({off_name!r}) != {off_value!r}


def _repogym_fail(value=None):
    if _repogym_decoy:
        raise AssertionError("assert False")
    return value


def _repogym_decoys(scope, hidden, functions, classes, wrap):
    import fnmatch
    import sys

    def matches(name, patterns):
        for pattern in patterns:
            if any(c in pattern for c in "*?["):
                if fnmatch.fnmatch(name, pattern):
                    return True
            elif name.startswith(pattern):
                return True
        return False

    def is_test(name, obj, patterns):
        if isinstance(obj, (staticmethod, classmethod)):
            obj = obj.__func__
        fixture = (getattr(obj, "_pytestfixturefunction", None) is not None
                   or type(obj).__name__ == "FixtureFunctionDefinition")
        return (callable(obj) and not isinstance(obj, type) and not fixture
                and matches(name, patterns))

    def inspect_function(obj):
        import types
        return isinstance(obj, types.FunctionType)

    def testcase(cls):
        unittest = sys.modules.get("unittest")
        return unittest is not None and issubclass(cls, unittest.TestCase)

    def holds(owner):
        return any(path[:len(owner)] == owner for path in hidden)

    def failing(method):
        # a hidden test the file's text does not write: inherited from another file's class
        # (the file's own bases are rewritten in its text), or made by code (uritemplate's
        # tests are set on the class from data): it runs, then fails, as the others do
        import functools
        import inspect

        if inspect.iscoroutinefunction(method):
            @functools.wraps(method)
            async def wrapper(*args, **kwargs):
                await method(*args, **kwargs)
                raise AssertionError("assert False")
        else:
            @functools.wraps(method)
            def wrapper(*args, **kwargs):
                method(*args, **kwargs)
                raise AssertionError("assert False")
        return wrapper

    def drop(cls, name, raw):
        # the test leaves the class, not its subclasses: another file's class that inherits
        # it as one of its own hidden tests takes it back (itsdangerous: TestTimestampSigner
        # in test_timed.py inherits TestSigner's tests from test_signer.py)
        stash = vars(cls).get("_repogym_dropped")
        if stash is None:
            stash = dict()
            setattr(cls, "_repogym_dropped", stash)
        stash[name] = raw
        setattr(cls, name, None)

    def dropped(cls, name):
        for klass in cls.__mro__:
            stash = vars(klass).get("_repogym_dropped") or dict()
            if name in stash:
                return stash[name]
        return None

    def visit(cls, owner):
        names = hidden.get(owner, ())
        for name in names:
            if getattr(cls, name, None) is None and dropped(cls, name) is not None:
                setattr(cls, name, dropped(cls, name))
        for name in wrap.get(owner, ()):
            made = getattr(cls, name, None)  # inherited, or set on the class by code
            if inspect_function(made):
                setattr(cls, name, failing(made))
        patterns = ["test"] if testcase(cls) else functions
        seen = set()
        for klass in cls.__mro__:
            for name, raw in list(vars(klass).items()):
                if name in seen or isinstance(raw, type):
                    continue
                seen.add(name)
                if name not in names and is_test(name, raw, patterns):
                    drop(cls, name, raw)
        for name, raw in list(vars(cls).items()):
            if isinstance(raw, type) and matches(name, classes):
                if holds(owner + (name,)):
                    visit(raw, owner + (name,))
                else:
                    setattr(cls, name, None)

    for name, obj in list(scope.items()):
        if name.startswith("_repogym"):
            continue
        if isinstance(obj, type):
            if not (matches(name, classes) or testcase(obj)):
                continue
            if holds((name,)) and obj.__module__ != scope.get("__name__"):
                # imported, and collected here too: a subclass of this module's own takes
                # its place, so that what follows leaves the other file's class as it is
                obj = scope[name] = type(obj)(name, (obj,), dict(
                    __module__=scope.get("__name__"), __qualname__=name))
            if holds((name,)) or obj.__module__ == scope.get("__name__"):
                # a class of no hidden test defined here loses its tests and stays, for the
                # test files that import it (itsdangerous' test_url_safe.py imports
                # TestSerializer from test_serializer.py)
                visit(obj, (name,))
            else:  # imported: its own file runs it, and other files import it from there
                del scope[name]
        elif is_test(name, obj, functions) and name not in hidden.get((), ()):
            del scope[name]


if _repogym_decoy:
    _repogym_decoys(globals(), {hidden!r}, {functions!r}, {classes!r}, {wrap!r})
del _repogym_decoys
'''


def hidden_by_file(ids: list[str]) -> dict[str, dict[tuple[str, ...], set[str]]]:
    """``{file: {(class, ...): {function, ...}}}`` from node ids (parameters dropped)."""
    out: dict[str, dict[tuple[str, ...], set[str]]] = {}
    for node in ids:
        file, *names = node.split("[", 1)[0].split("::")
        if names:
            out.setdefault(file, {}).setdefault(tuple(names[:-1]), set()).add(names[-1])
    return out


def _hidden_defs(tree: ast.Module, hidden: dict[tuple[str, ...], set[str]]
                 ) -> tuple[list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]], list[str]]:
    """(``A::b`` and the definition the file's text holds for it, ``A::b`` of the hidden
    tests whose class inherits them from a class of another file). A method a class inherits
    from a class of the same file is that class's definition (addict: every test of
    DictTests is written in its base class AbstractTestsClass)."""
    found: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []
    elsewhere: list[str] = []
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}

    def method(cls: ast.ClassDef, name: str, seen: set[str]
               ) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        for node in cls.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
                return node
        for base in cls.bases:  # in the order Python looks them up, for the usual cases
            if isinstance(base, ast.Name) and base.id in classes and base.id not in seen:
                seen.add(base.id)
                got = method(classes[base.id], name, seen)
                if got is not None:
                    return got
        return None

    def walk(body: list[ast.stmt], owner: tuple[str, ...]) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if node.name in hidden.get(owner, ()):
                    found.append(("::".join((*owner, node.name)), node))
            elif isinstance(node, ast.ClassDef):
                path = (*owner, node.name)
                walk(node.body, path)
                own = {n.name for n in node.body
                       if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
                for name in sorted(hidden.get(path, set()) - own):
                    got = method(node, name, {node.name})
                    if got is not None:
                        found.append(("::".join((*path, name)), got))
                    else:
                        elsewhere.append("::".join((*path, name)))

    walk(tree.body, ())
    written = set()

    def paths(body: list[ast.stmt], owner: tuple[str, ...]) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                written.add((*owner, node.name))
                paths(node.body, (*owner, node.name))

    paths(tree.body, ())
    for owner, names in sorted(hidden.items()):  # a class the file imports: it is wrapped
        if owner and owner not in written:
            elsewhere.extend("::".join((*owner, name)) for name in sorted(names))
    return found, elsewhere


def _returns(func: ast.AST) -> list[ast.Return]:
    """The function's own ``return`` statements (not those of functions defined in it)."""
    out = []
    stack = list(ast.iter_child_nodes(func))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return):
            out.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                 ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))
    return out


def decoy_text(text: str, hidden: dict[tuple[str, ...], set[str]], functions: list[str],
               classes: list[str], off: tuple[str, str] = ("", "")) -> tuple[str, list[str]]:
    """(the decoy's text, the hidden tests it defines or its classes inherit). Each hidden
    test keeps its own text, decorators and code, and fails once its body ran: a statement
    that fails is added after its last one, and each ``return`` fails before it returns.
    Lines keep their numbers. A hidden test the text does not write (inherited from another
    file's class, or made by code) is wrapped at import to fail after it ran.
    ``off``: the variable (name, value) that, set, makes the text behave as the original."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return text, []
    lines = text.encode("utf-8", "surrogateescape").splitlines(keepends=True)
    edits: list[tuple[int, int, int, int, str]] = []  # line, col, end line, end col, new text
    defs, elsewhere = _hidden_defs(tree, hidden)
    for func in {id(f): f for _, f in defs}.values():  # a base's method, once
        last = func.body[-1]
        if last.lineno == func.lineno:  # `def test(): ...` on one line
            edits.append((last.end_lineno or last.lineno, last.end_col_offset or 0,
                          last.end_lineno or last.lineno, last.end_col_offset or 0,
                          f"; {FAIL}"))
        else:
            indent = lines[func.body[0].lineno - 1][:func.body[0].col_offset].decode(
                "utf-8", "surrogateescape")
            end = last.end_lineno or last.lineno
            edits.append((end + 1, 0, end + 1, 0, f"{indent}{FAIL}\n"))
        for ret in _returns(func):
            value = ret.value
            if value is None:  # `return`: it returns what _repogym_fail() returns, None
                at = (ret.end_lineno or ret.lineno, ret.end_col_offset or 0)
                edits.append((*at, *at, f" {FAIL}"))
            else:  # `return X`: `return _repogym_fail((X))`
                at = (value.end_lineno or value.lineno, value.end_col_offset or 0)
                edits.append((*at, *at, "))"))
                edits.append((value.lineno, value.col_offset, value.lineno, value.col_offset,
                              "_repogym_fail(("))
    for line, col, end_line, end_col, new in sorted(edits, reverse=True):
        lines = _splice(lines, line, col, end_line, end_col, new.encode())
    literal = {owner: sorted(names) for owner, names in hidden.items()}
    body = b"".join(lines).decode("utf-8", "surrogateescape")
    if body and not body.endswith("\n"):
        body += "\n"
    wrap: dict[tuple[str, ...], list[str]] = {}
    for node in elsewhere:
        *owner, name = node.split("::")
        wrap.setdefault(tuple(owner), []).append(name)
    return body + APPENDIX.format(hidden=literal, functions=list(functions),
                                  classes=list(classes), off_name=off[0], off_value=off[1],
                                  wrap=wrap), sorted({name for name, _ in defs} | set(elsewhere))


def _splice(lines: list[bytes], line: int, col: int, end_line: int, end_col: int,
            new: bytes) -> list[bytes]:
    """``lines`` with the span (1-based lines, byte columns) replaced by ``new``; the number of
    lines stays (a span over several lines leaves blank lines behind)."""
    if line > len(lines):  # after the last line
        if lines and not lines[-1].endswith(b"\n"):
            lines[-1] += b"\n"
        return [*lines, new]
    head, tail = lines[line - 1][:col], lines[end_line - 1][end_col:]
    spanned = end_line - line
    return [*lines[:line - 1], head + new + tail, *([b"\n"] * spanned), *lines[end_line:]]


def matches_any(name: str, patterns: list[str]) -> bool:
    import fnmatch

    return any(fnmatch.fnmatch(name, p.rsplit("/", 1)[-1]) for p in patterns)


def new_name(rng: random.Random, words: list[str], folder: str, python_files: list[str],
             taken: set[str], root: str, file_name: Any) -> str:
    """A free file name in ``folder`` made like the canaries' (whatever ``python_files``
    accepts, else ``test_<word>_<word>.py``: the run names its files, so a name discovery
    would not collect is collected all the same; voluptuous' ``python_files = tests.py``
    accepts one name, which its own file holds)."""
    for _ in range(200):
        a, b = rng.sample(words, 2)
        for name in (file_name(python_files, f"{a}_{b}", folder), f"test_{a}_{b}.py"):
            if name and name not in taken and not os.path.lexists(
                    os.path.join(root, folder, name)):
                taken.add(name)
                return name
    raise RuntimeError(f"no free file name in {folder or '.'}/")


def alias_data(root: str, path: str, new: str) -> list[str]:
    """Links named after the new module next to what is named after the old one, in the test
    file's folder and the folders right under it."""
    folder = os.path.join(root, os.path.dirname(path))
    old_stem = os.path.basename(path)[:-3]
    new_stem = new[:-3]
    made = []
    places = [folder] + [os.path.join(folder, d) for d in sorted(os.listdir(folder))
                         if d != "__pycache__" and os.path.isdir(os.path.join(folder, d))
                         and not os.path.islink(os.path.join(folder, d))]
    for place in places:
        for entry in sorted(os.listdir(place)):
            if entry == old_stem:
                target = new_stem
            elif entry.startswith(old_stem + ".") and not entry.endswith((".py", ".pyc")):
                target = new_stem + entry[len(old_stem):]
            else:
                continue
            link = os.path.join(place, target)
            if not os.path.lexists(link):
                os.symlink(entry, link)
                made.append(os.path.relpath(link, root))
    return made


def apply(request: dict[str, Any], root: str, config: dict[str, Any], taken: set[str],
          file_name: Any) -> dict[str, Any]:
    """Renames the named test files and prepares the decoys; returns ``{"renamed": {old: new},
    "decoys": {path: stored copy}, "expected": {path: [A::b, ...]}, "aliases": [...]}``."""
    rng = random.Random(request["seed"])
    words = list(request["words"])
    hidden = hidden_by_file(list(request.get("hidden", [])))
    name, value = (list(request.get("off") or ["", ""]) + ["", ""])[:2]
    off = (str(name), str(value))
    out: dict[str, Any] = {"renamed": {}, "decoys": {}, "expected": {}, "aliases": []}
    os.makedirs(DECOY_DIR, mode=0o700, exist_ok=True)
    for path in request.get("files", []):
        full = os.path.join(root, path)
        base = os.path.basename(path)
        if (base == "conftest.py" or not base.endswith(".py") or os.path.islink(full)
                or not os.path.isfile(full) or not matches_any(base, config["python_files"])):
            continue
        folder = os.path.dirname(path)
        name = new_name(rng, words, folder, config["python_files"], taken, root, file_name)
        new = os.path.join(folder, name) if folder else name
        shutil.copyfile(full, os.path.join(root, new), follow_symlinks=False)
        out["renamed"][path] = new
        out["aliases"] += alias_data(root, path, name)
        if path in hidden:
            with open(full, encoding="utf-8", errors="surrogateescape") as f:
                text, expected = decoy_text(f.read(), hidden[path], config["functions"],
                                            config["classes"], off)
            stored = os.path.join(DECOY_DIR, f"{len(out['decoys'])}.py")
            with open(stored, "w", encoding="utf-8", errors="surrogateescape") as f:
                f.write(text)
            out["decoys"][path] = stored
            out["expected"][path] = expected
    for made in [*out["renamed"].values(), *out["aliases"]]:
        os.lchown(os.path.join(root, made), 0, 0)
    return out


def install(report: dict[str, Any], root: str) -> None:
    """Puts each decoy at its hidden tests' own path (root's, read-only for the tests' user):
    the test run ignores that path and collects the copy, the decoy run collects it."""
    for path, stored in sorted(report.get("decoys", {}).items()):
        full = os.path.join(root, path)
        if os.path.islink(full):
            os.unlink(full)
        shutil.copyfile(stored, full)
        os.chown(full, 0, 0)
        os.chmod(full, 0o644)


if __name__ == "__main__":  # only plant.py runs it
    sys.exit("run by plant.py")
