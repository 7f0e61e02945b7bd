"""How to install a Python repository and run its tests, read from its own files.

Looks at pyproject.toml, setup.cfg, setup.py, requirements*.txt and tox.ini: the Python version
it accepts, the extras and requirement files that hold test dependencies, and pytest plugins its
configuration needs. Tests always run with ``python -m pytest -rA`` (pytest also runs unittest
and nose-style tests), so the result parses with the pytest log parser.

What the tests import and nothing declares (mccabe 0.7.0's test module needs hypothesis and
hypothesmith, named nowhere in its sdist: without them it does not even import) is installed
too, best effort: each name the test files import that is neither the standard library's nor
the repository's own, as its distribution (``yaml`` is PyYAML), in a setup line whose failures
(a name that is on no index) do not stop the build and that the build's check does not verify.
"""

from __future__ import annotations

import ast
import configparser
import re
import shlex
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from repogym import syntax_lock
from repogym.schema import PYTHON_SUITES, Environment

from .common import is_test_path
from .detect_langs import detect_language, language_environment
from .tree_view import TreeView, load_toml

TEST_EXTRAS = ("test", "tests", "testing", "dev")
TEST_REQUIREMENTS = re.compile(
    r"^(requirements[-_/].*(test|dev)[^/]*|(test|dev)[-_]?requirements[^/]*)\.txt$", re.I
)
# Options in pytest's configuration that need a plugin to parse.
PLUGIN_OPTIONS = {
    "--cov": "pytest-cov", "asyncio_mode": "pytest-asyncio", "-n ": "pytest-xdist",
    "--timeout": "pytest-timeout", "--benchmark": "pytest-benchmark", "--mypy": "pytest-mypy",
    "--doctest-rst": "pytest-doctestplus", "--flake8": "pytest-flake8",
}
# Modules the tests import whose distribution has another name.
DISTRIBUTIONS = {
    "yaml": "PyYAML", "dateutil": "python-dateutil", "PIL": "Pillow", "bs4": "beautifulsoup4",
    "attr": "attrs", "sklearn": "scikit-learn", "cv2": "opencv-python-headless",
    "Crypto": "pycryptodome", "OpenSSL": "pyOpenSSL", "jwt": "PyJWT", "magic": "python-magic",
    "dotenv": "python-dotenv", "slugify": "python-slugify", "serial": "pyserial",
    "git": "GitPython", "zmq": "pyzmq", "markdown": "Markdown", "docx": "python-docx",
    "pkg_resources": "setuptools", "google.protobuf": "protobuf", "icu": "PyICU",
    "tidylib": "pytidylib", "railroad": "railroad-diagrams",
}
# Namespace packages: the distribution is named after the first two parts (jaraco.path)
NAMESPACES = frozenset({"jaraco", "backports", "zope", "sphinxcontrib", "dogpile", "google",
                        "ruamel", "azure"})
# Names a test imports that no index should be asked for: the test runner, and Python 2's
# standard library (imported in `try` blocks of code that ran on both)
NOT_DISTRIBUTIONS = frozenset({
    "pytest", "_pytest", "py", "pluggy", "__builtin__", "StringIO", "cStringIO", "cPickle",
    "urllib2", "urlparse", "httplib", "Queue", "ConfigParser", "HTMLParser", "Tkinter",
    "cookielib", "commands", "exceptions", "sets", "thread", "dummy_thread", "copy_reg",
    "repr", "htmlentitydefs", "SocketServer", "BaseHTTPServer", "SimpleHTTPServer", "xmlrpclib",
    "ntpath", "posixpath", "winreg", "_winreg", "msvcrt", "nt", "java", "clr", "gdbm",
    "dbhash", "dumbdbm", "anydbm", "md5", "sha", "new", "imp", "distutils",
})
# Names of a project's own test helpers (pycodestyle 2.15.0's tests import `testing.support`,
# a folder its sdist lacks): where the tree has no such module, an index package of that name
# is somebody else's code, never what the tests meant
HELPER_NAMES = frozenset({
    "testing", "tests", "test", "testutils", "test_utils", "testlib", "testhelpers", "helpers",
    "helper", "support", "utils", "util", "common", "fixtures", "conftest", "compat", "base",
    "data", "config", "settings", "constants", "shared",
})
NOT_CODE_FOLDERS = frozenset({"docs", "doc", "examples", "example", "benchmarks", "scripts",
                              "tools", "ci", ".github"})
MAX_GUESSED = 12  # imports installed on a guess, at most
# Tried in this order: the newest Python that old packages still install on comes first.
PYTHON_PREFERENCE = ("3.11", "3.13", "3.9")
PACKAGE_FILES = ("pyproject.toml", "setup.py", "setup.cfg")


@dataclass(frozen=True)
class EnvOverrides:
    """What the user said explicitly; each set field replaces what detection found."""

    python: str | None = None
    setup: tuple[str, ...] | None = None
    test_cmd: str | None = None
    log_parser: str | None = None
    image: str | None = None

    def apply(self, env: Environment) -> Environment:
        changes = {k: v for k, v in self.__dict__.items() if v is not None}
        return replace(env, **changes) if changes else env


def has_tests(tree: TreeView) -> bool:
    return any(p.endswith(".py") and is_test_path(p) and Path(p).name != "conftest.py"
               for p in tree.files())


def detect_environment(tree: TreeView, overrides: EnvOverrides | None = None) -> Environment:
    """The environment a task of this tree needs (before ``overrides``)."""
    files = set(tree.files())
    language = detect_language(files)
    if language is not None:
        return (overrides or EnvOverrides()).apply(language_environment(tree, language))
    pyproject = load_toml(tree.read_text("pyproject.toml") or "") if "pyproject.toml" in files \
        else {}
    setup_cfg = _read_cfg(tree.read_text("setup.cfg") or "")
    setup_py = tree.read_text("setup.py") or ""
    tox = _read_cfg(tree.read_text("tox.ini") or "")
    extras = _extras(pyproject, setup_cfg, setup_py)
    env = Environment(
        python=_python_version(_python_requires(pyproject, setup_cfg, setup_py),
                               _classified(tree, files, pyproject, setup_cfg, setup_py)),
        setup=tuple(_setup_commands(tree, files, pyproject, setup_cfg, setup_py, tox, extras)),
    )
    missed = _undiscovered_tests(tree, files, pyproject)
    if missed:  # discovery finds them too: the grader names test files the same way for all
        patterns = [*DEFAULT_PYTHON_FILES, *sorted({Path(f).name for f in missed})]
        option = shlex.quote("python_files=" + " ".join(patterns))
        env = replace(env, test_cmd=f"{env.test_cmd} -o {option}")
    return (overrides or EnvOverrides()).apply(env)


DEFAULT_PYTHON_FILES = ("test_*.py", "*_test.py")
DISCOVERED = re.compile(r"^(test_.*|.*_test)\.py$")  # what DEFAULT_PYTHON_FILES accepts


def _undiscovered_tests(tree: TreeView, files: set[str], pyproject: dict[str, Any]
                        ) -> list[str]:
    """The test files pytest's discovery, as configured, would miss when it finds no other:
    the files in test folders that define tests (decorator 5.3: tests/test.py, no pytest
    configuration; every candidate's run collected nothing). Empty when the configuration
    says where the tests are or discovery finds a test file."""
    config = _pytest_config_text(tree, files, pyproject)
    if "python_files" in config or "testpaths" in config:
        return []
    if any(DISCOVERED.match(Path(f).name) for f in files):
        return []
    return sorted(f for f in files if f.endswith(".py") and is_test_path(f)
                  and Path(f).name != "conftest.py" and _defines_tests(tree.read_text(f) or ""))


def _defines_tests(text: str) -> bool:
    """Whether a module defines a test function or a class with test methods."""
    try:
        tree = syntax_lock.parse(text)
    except (SyntaxError, ValueError):
        return False
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                node.name.startswith("test"):
            return True
        if isinstance(node, ast.ClassDef) and any(
                isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                and m.name.startswith("test") for m in node.body):
            return True
    return False


# ---------------------------------------------------------------------------- python version


def _read_cfg(text: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text)
    except configparser.Error:
        return configparser.ConfigParser(interpolation=None)
    return parser


def _python_requires(pyproject: dict[str, Any], setup_cfg: configparser.ConfigParser,
                     setup_py: str) -> str:
    found = pyproject.get("project", {}).get("requires-python")
    if not found and setup_cfg.has_option("options", "python_requires"):
        found = setup_cfg.get("options", "python_requires")
    if not found:
        match = re.search(r"python_requires\s*=\s*['\"]([^'\"]+)['\"]", setup_py)
        found = match.group(1) if match else ""
    return str(found or "").strip()


def _classified(tree: TreeView, files: set[str], pyproject: dict[str, Any],
                setup_cfg: configparser.ConfigParser, setup_py: str) -> list[tuple[int, int]]:
    """The Python 3 versions the project says it supports (its ``Programming Language ::
    Python :: 3.N`` classifiers: in pyproject.toml, setup.cfg, setup.py or an sdist's
    PKG-INFO)."""
    texts = [str(pyproject.get("project", {}).get("classifiers", "")), setup_py,
             setup_cfg.get("metadata", "classifiers", fallback="")]
    if "PKG-INFO" in files:
        texts.append(tree.read_text("PKG-INFO") or "")
    found = re.findall(r"Programming Language :: Python :: 3\.(\d+)", "\n".join(texts))
    return sorted({(3, int(minor)) for minor in found})


def _python_version(requires: str, classified: list[tuple[int, int]] | None = None) -> str:
    """The Python the project's tests run on: the first of ``PYTHON_PREFERENCE`` that
    ``requires`` (its ``requires-python``) allows, unless its classifiers name only older
    ones: then the newest allowed one they name or are older than, else the oldest allowed one
    above them (astor 0.8.1 allows any Python 3, names up to 3.8, and its tests use
    ``collections.Mapping``, gone in 3.10: 3.9)."""
    allowed = [v for v in PYTHON_PREFERENCE if v in PYTHON_SUITES and _allows(requires, v)]
    if not allowed:
        return PYTHON_PREFERENCE[0]
    newest = max(classified or [(0, 0)])
    if newest == (0, 0) or _key(allowed[0]) <= newest:
        return allowed[0]
    older = [v for v in allowed if _key(v) <= newest]
    return max(older, key=_key) if older else min(allowed, key=_key)


def _key(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def _allows(requires: str, version: str) -> bool:
    if not requires:
        return True
    try:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet
    except ModuleNotFoundError:  # packaging comes with pip's toolchain nearly everywhere
        return True
    try:
        return SpecifierSet(requires).contains(f"{version}.0")
    except InvalidSpecifier:
        return True


# ---------------------------------------------------------------------------- dependencies


def _extras(pyproject: dict[str, Any], setup_cfg: configparser.ConfigParser,
            setup_py: str) -> list[str]:
    names = set(pyproject.get("project", {}).get("optional-dependencies", {}) or {})
    if setup_cfg.has_section("options.extras_require"):
        names |= set(setup_cfg.options("options.extras_require"))
    names |= set(_setup_py_keyword(setup_py, "extras_require") or {})
    return [e for e in TEST_EXTRAS if e in names]


def _setup_py_keyword(setup_py: str, keyword: str) -> Any:
    """The literal value of a ``setup(keyword=...)`` argument, or None."""
    try:
        tree = syntax_lock.parse(setup_py)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg == keyword:
                    try:
                        return ast.literal_eval(kw.value)
                    except ValueError:
                        return None
    return None


def _extra_packages(pyproject: dict[str, Any], setup_py: str, tox: configparser.ConfigParser,
                    config_text: str) -> list[str]:
    """Test dependencies that live outside extras: tests_require, poetry and PEP 735 groups,
    tox deps, and plugins the pytest configuration needs."""
    found: list[str] = list(_setup_py_keyword(setup_py, "tests_require") or [])
    poetry = pyproject.get("tool", {}).get("poetry", {})
    for group in ("test", "tests", "dev"):
        deps = poetry.get("group", {}).get(group, {}).get("dependencies", {})
        found += [name for name in deps if name != "python"]
    found += [name for name in poetry.get("dev-dependencies", {}) if name != "python"]
    for group in ("test", "tests", "dev"):
        found += [d for d in pyproject.get("dependency-groups", {}).get(group, [])
                  if isinstance(d, str)]
    if tox.has_option("testenv", "deps"):
        for line in tox.get("testenv", "deps").splitlines():
            line = line.split("#", 1)[0].strip()
            # a factor's dependency, `py311,unidecode: Unidecode>=1.1.1`: the requirement
            # (python-slugify 9.2: pip read "unidecode: pip" as one and every setup failed)
            factor = re.match(r"^!?[\w.-]+(?:\s*,\s*!?[\w.-]+)*\s*:\s+(\S.*)$", line)
            line = factor.group(1) if factor else line
            if line and not re.search(r"[{}]|^-", line):
                found.append(line)
    found += [plugin for option, plugin in PLUGIN_OPTIONS.items() if option in config_text]
    return list(dict.fromkeys(found))


def _pytest_config_text(tree: TreeView, files: set[str], pyproject: dict[str, Any]) -> str:
    text = str(pyproject.get("tool", {}).get("pytest", {}))
    for name in ("pytest.ini", "setup.cfg", "tox.ini"):
        if name in files:
            cfg = _read_cfg(tree.read_text(name) or "")
            for section in ("pytest", "tool:pytest"):
                if cfg.has_section(section):
                    text += str(dict(cfg.items(section)))
    return text


def _setup_commands(tree: TreeView, files: set[str], pyproject: dict[str, Any],
                    setup_cfg: configparser.ConfigParser, setup_py: str,
                    tox: configparser.ConfigParser, extras: list[str]) -> list[str]:
    pip = "python -m pip install"
    commands = []
    packaged = "setup.py" in files or "build-system" in pyproject or "project" in pyproject \
        or setup_cfg.has_section("metadata")
    if packaged:
        target = f".[{','.join(extras)}]" if extras else "."
        commands.append(f"{pip} -e {shlex.quote(target)}")
    elif "requirements.txt" in files:
        commands.append(f"{pip} -r requirements.txt")
    for path in sorted(files):
        if TEST_REQUIREMENTS.match(path):
            commands.append(f"{pip} -r {shlex.quote(path)}")
    config_text = _pytest_config_text(tree, files, pyproject)
    extra = _extra_packages(pyproject, setup_py, tox, config_text)
    if extra:
        commands.append(f"{pip} " + " ".join(shlex.quote(p) for p in extra))
    guessed = imported_by_tests(tree, files)
    if guessed:
        commands.append(guess_command(guessed))
    # the harness's plugin needs pytest 4.6 (harness_plugin.py): a project's older pin (funcy's
    # history: pytest==2.4.2 in test_requirements.txt, "pytest has no attribute hookimpl" in
    # every run) is upgraded, as pip says in the build's log; so is the pin of `py`, the old
    # pytest's library, which a newer pytest would still use (py 1.4.17: INTERNALERROR)
    upgrades = [HARNESS_PYTEST, *([HARNESS_PY] if _pins_py(tree, files) else [])]
    commands.append(f"{pip} " + " ".join(shlex.quote(u) for u in upgrades))
    return commands


def guess_command(names: list[str], why: str = "imported by the tests") -> str:
    """The setup line that installs ``names`` on a guess: one pip per name, each allowed to
    fail; `for ... do` is no pip command the build's check reads (installed.pip_requests), so
    a guess is never a requirement."""
    return (f"for p in {' '.join(shlex.quote(g) for g in names)}; do python -m pip install -q "
            f'"$p" || echo "repogym: $p ({why}) did not install"; done')


def with_change_imports(env: Environment, before: TreeView, after: TreeView,
                        changed: set[str]) -> Environment:
    """``env`` (detected on ``before``) with what the files a commit changes import in
    ``after`` and the environment lacks, installed on a guess. A commit's new test file, or its
    fix, may import what the snapshot never needed (isodate's history: two new test modules
    import six, which the fix adds to ``install_requires``): without it the gold cannot pass,
    and an agent who writes the same fix could not be rewarded."""
    # the code and the tests: not the build's own script, documentation or examples
    kept = {p for p in changed if p.endswith(".py") and Path(p).name != "setup.py"
            and Path(p).parts[0] not in NOT_CODE_FOLDERS}
    if not kept or env.language != "python":
        return env
    files_before, files_after = set(before.files()), set(after.files())
    tests = {p for p in kept if is_test_path(p)}
    # a test file's imports whole (a new one's are all new); a code file's, those the change
    # adds (what it imported before, the snapshot already satisfied)
    wanted = set(imported_by_tests(after, files_after, scan=tests)) | (
        set(imported_by_tests(after, files_after, scan=kept - tests))
        - set(imported_by_tests(before, files_before, scan=kept - tests)))
    if not wanted:  # the snapshot's own guess is read only when there is something to add
        return env
    new = sorted(wanted - set(imported_by_tests(before, files_before)))
    if not new:
        return env
    setup = list(env.setup)
    at = len(setup) - 1 if setup and HARNESS_PYTEST in setup[-1] else len(setup)
    setup.insert(at, guess_command(new, "imported by the change"))
    return replace(env, setup=tuple(setup))


def _pins_py(tree: TreeView, files: set[str]) -> bool:
    """Whether a requirements file of the project pins ``py`` to a version."""
    for path in sorted(files):
        if path == "requirements.txt" or TEST_REQUIREMENTS.match(path):
            text = tree.read_text(path) or ""
            if re.search(r"^\s*py\s*(==|<|~=)", text, re.M | re.I):
                return True
    return False


HARNESS_PYTEST = "pytest>=4.6"
HARNESS_PY = "py>=1.11"


def _with_fallback(module: ast.AST) -> set[int]:
    """The imports tried before a fallback (``try: import unittest2 as unittest`` / ``except
    ImportError: import unittest``): the tests run without them, and installing one can break
    them (astor 0.8.1: unittest2 1.1 fails every test class under pytest)."""
    out: set[int] = set()
    for node in ast.walk(module):
        if not isinstance(node, ast.Try):
            continue
        fallback = any(_catches_import_error(h) and any(
            isinstance(n, (ast.Import, ast.ImportFrom)) for b in h.body for n in ast.walk(b))
            for h in node.handlers)
        if fallback:
            out |= {id(n) for b in node.body for n in ast.walk(b)
                    if isinstance(n, (ast.Import, ast.ImportFrom))}
    return out


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(k, ast.Name) and k.id in ("ImportError", "ModuleNotFoundError",
                                                    "Exception") for k in kinds)


def imported_by_tests(tree: TreeView, files: set[str], scan: set[str] | None = None
                      ) -> list[str]:
    """The distributions of what the test files import (with ``scan``: what those files of
    the tree import, tests or not) that is neither the standard library nor the repository's
    own (any module or folder name of the tree), sorted."""
    local = {Path(p).name.split(".")[0] for p in files}  # modules, extensions' sources
    local |= {part for p in files for part in Path(p).parts[:-1]}
    names: set[str] = set()
    for path in sorted(files if scan is None else scan & files):
        if not path.endswith(".py") or (scan is None and not is_test_path(path)):
            continue
        try:
            tree_ast = syntax_lock.parse(tree.read_text(path) or "")
        except (SyntaxError, ValueError):
            continue
        shimmed = _with_fallback(tree_ast)
        for node in ast.walk(tree_ast):
            if id(node) in shimmed:
                continue
            if isinstance(node, ast.Import):
                names |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module)
    found = set()
    for name in names:
        top = name.split(".")[0]
        if (top in sys.stdlib_module_names or top in NOT_DISTRIBUTIONS or top in local
                or top in HELPER_NAMES
                or not top.isidentifier() or top.startswith("_")):
            continue
        dotted = next((d for d in DISTRIBUTIONS if name == d or name.startswith(d + ".")), None)
        if dotted:
            found.add(DISTRIBUTIONS[dotted])
        elif top in NAMESPACES:
            if "." in name:
                found.add(".".join(name.split(".")[:2]))
        else:
            found.add(top)
    return sorted(found)[:MAX_GUESSED]
