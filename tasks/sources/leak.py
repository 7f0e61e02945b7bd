"""The leak check: does a task's image already hold the code its gold patch writes?

An agent that can import or read a working version of what it is asked to write (a vendored
copy installed from elsewhere, the distribution's build of the same library, a later release
installed as somebody's dependency, a build folder's copy) can hand it in. So before a
candidate's tests run, every Python file its agent could read (as the agent's user, archives
such as wheels and eggs included) is compared with the gold code, in every task kind: the
functions
the gold patch changes or adds (for a replication task, the removed ones; for a synthetic
task, the unbroken one; for a mined or SWE-bench task, the fix). A function of the image is a
copy of one of them when, as normalised token sequences (:mod:`.normast`: names of locals,
docstrings, formatting and comments gone),

- it is the same (``exact``), or nearly (``near``: similarity >= ``near``, for functions of
  at least twice ``min_tokens``: small ones of one shape, decorators say, are alike anyway);
- it has the same name (and class, or enclosing function) and similarity >= ``same_name``
  (not for a module's dunder functions: every module's ``__getattr__`` looks alike; nor for a
  name that ``convention`` or more other files of the image define, a plugin's ``setup`` or a
  script's ``main``: sphinx-8273's fix adds a line to ``sphinx/builders/manpage.py::setup``,
  and the ``setup`` of every installed sphinxcontrib package, a list of ``add_config_value``
  calls, came out closer to the fixed one than to the unfixed one);
- it has the same qualified name in a package of the same name, another version of the same
  library (``same library``: similarity >= ``same_library``);

and it is closer to the fixed function than to the unfixed one (the repository's own unfixed
code, and copies of it, are no leak) and, where the patch changes a function, holds at least
``holds_change`` of the change (:func:`held`): an older relative without the fix is no leak.
Functions of fewer than ``min_tokens`` tokens are not
compared: too generic to tell a copy from a coincidence.

The files the repository itself holds (tracked at the task's base commit, under /testbed) are
never copies: they are the context the agent is meant to read, and a repository is full of
functions alike (isodate's ``Duration.__eq__`` is 0.93 like its ``__ne__``; every Sphinx
extension's ``setup`` looks like every other's). What the check looks for is code the
repository does not own: installed packages, caches, build folders, anything else on the disk.
A copy that the install itself makes of a repository file (``setup.py``'s ``scripts=``) is a
link to that file in the image (:mod:`repogym.images.installed`), so it holds what /testbed
holds and is no copy either.

Files are parsed on the host, once per content (a cache by hash serves every image of the
same base), and only those whose text mentions the function's name or its rarer identifiers.
"""

from __future__ import annotations

import base64
import hashlib
import io
import re
import subprocess
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from difflib import SequenceMatcher
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from repogym.envs.grading.grader import Grader
from repogym.errors import ImageBuildError, RepogymError, SandboxError, TaskError
from repogym.images.repository import ensure_image
from repogym.repo import tree_paths
from repogym.sandbox.base import SandboxConfig
from repogym.sandbox.docker import DockerSandbox

from . import normast
from .common import is_test_path
from .normast import Function, Index, similarity
from .pyast import module_name

if TYPE_CHECKING:
    from repogym.schema import Task

WORKDIR = "/testbed"
_LOCAL = re.compile(r"^[NA]:v\d+$")  # a local variable or an argument, by its number
ARCHIVES = (".whl", ".zip", ".egg", ".pyz")
# every file the agent's user can read that Python could import, as one gzipped tar
LIST_FILES = (
    "find / \\( -path /proc -o -path /sys -o -path /dev \\) -prune -o -type f \\( "
    + " -o ".join(f"-name '*{s}'" for s in (".py", ".pyw", *ARCHIVES))
    + " \\) -readable -size -{max_kb}k -print0 2>/dev/null "
    "| tar -czf - --null --no-recursion -T - 2>/dev/null | base64 -w0"
)


@dataclass(frozen=True)
class LeakConfig:
    """How alike a function of the image must be to a gold function to count as its copy."""

    min_tokens: int = 20  # gold functions shorter than this are not compared
    near: float = 0.85  # any function this similar is a copy
    same_name: float = 0.6  # a function of the same name (and class) this similar is one
    same_library: float = 0.4  # the same qualified name in a package of the same name
    convention: int = 4  # a name this many other files define is no evidence by itself
    holds_change: float = 0.5  # the share of the patch's change a copy of a changed one holds
    max_file_kb: int = 4096  # larger files are not read (generated tables, not code)

    def __post_init__(self) -> None:
        for name in ("near", "same_name", "same_library", "holds_change"):
            value = getattr(self, name)
            if not 0 < value <= 1:
                raise ValueError(f"{name}={value}: give a similarity in (0, 1].")
        if self.min_tokens < 1 or self.convention < 1:
            raise ValueError(f"min_tokens={self.min_tokens} and convention={self.convention}: "
                             "give positive counts.")


@dataclass(frozen=True)
class Gold:
    """One function the gold patch writes: as it is after the patch, and before (if it was)."""

    file: str
    fixed: Function
    broken: Function | None

    @property
    def label(self) -> str:
        return f"{self.file}::{self.fixed.qualname}"

    @property
    def package(self) -> str:
        """The top-level package (or module) the file belongs to."""
        return module_name(self.file).split(".")[0]


@dataclass(frozen=True)
class Copy:
    """A function of the image that is a copy of a gold function."""

    gold: str
    path: str
    qualname: str
    similarity: float
    rule: str

    def __str__(self) -> str:
        return f"{self.path}::{self.qualname} ({self.rule}, {self.similarity:.2f} like {self.gold})"


# ---------------------------------------------------------------------------- the gold code


def gold_functions(patch: str, before: dict[str, str], config: LeakConfig) -> list[Gold]:
    """The functions ``patch`` changes or adds in non-test Python files, given the text of
    those files before it (``before``, by path; a missing one is a file the patch adds)."""
    after = apply_patch(patch, before)
    out: list[Gold] = []
    for path, text in sorted(after.items()):
        # one name can be defined more than once (sympy's two nested ``writexml``, a
        # property's getter and setter, a definition per Python version): a function is
        # unchanged when any definition of its name before the patch is the same
        old: dict[str, list[Function]] = {}
        for f in _functions(path, before.get(path, "").encode("utf-8", "surrogateescape")):
            old.setdefault(f.qualname, []).append(f)
        new = _functions(path, text.encode("utf-8", "surrogateescape"))
        for fn in new:
            priors = old.get(fn.qualname, [])
            if len(fn.tokens) < config.min_tokens or any(p.tokens == fn.tokens for p in priors):
                continue
            same = [f for f in new if f.qualname == fn.qualname]
            out.append(Gold(path, fn, _prior(fn, same, priors)))
    return out


def _prior(fn: Function, after: list[Function], priors: list[Function]) -> Function | None:
    """The definition ``fn`` was before the patch: of the definitions of its name, the one at
    its place when the patch kept how many there are (``after``: those after it), else the
    most alike."""
    if not priors:
        return None
    if len(after) == len(priors):
        return priors[next(i for i, f in enumerate(after) if f is fn)]
    return max(priors, key=lambda p: similarity(p.tokens, fn.tokens))


def patched_files(patch: str) -> list[str]:
    """The non-test Python files a patch writes (after its renames)."""
    names = re.findall(r"^\+\+\+ b/(.+?)\s*$", patch, flags=re.MULTILINE)
    return sorted({n for n in names if n.endswith(".py") and not is_test_path(n)})


def apply_patch(patch: str, before: dict[str, str]) -> dict[str, str]:
    """The patched files' texts (only non-test Python files), by ``git apply`` in a scratch
    folder holding just those files."""
    files = patched_files(patch)
    if not files:
        return {}
    with tempfile.TemporaryDirectory(prefix="repogym-leak-") as tmp:
        root = Path(tmp)
        for path in files:
            if path in before:
                (root / path).parent.mkdir(parents=True, exist_ok=True)
                (root / path).write_text(before[path], encoding="utf-8")
        include = [f"--include={p}" for p in files]
        proc = subprocess.run(["git", "apply", "--whitespace=nowarn", *include, "-"],
                              cwd=root, input=patch.encode(), capture_output=True)
        if proc.returncode != 0:
            return {}  # validation says why; here there is nothing to compare
        return {p: (root / p).read_text(encoding="utf-8", errors="replace")
                for p in files if (root / p).exists()}


# ---------------------------------------------------------------------------- the image


def image_files(box: object, config: LeakConfig) -> dict[str, bytes]:
    """Every Python file the agent's user can read in a running container of the image, by
    path; the Python files inside readable archives are named ``archive!member``."""
    command = LIST_FILES.format(max_kb=config.max_file_kb)
    result = box.exec(["bash", "-c", command], user="repogym", timeout=600,  # type: ignore[attr-defined]
                      limit=1 << 30)
    if result.truncated or not result.output.strip():
        raise SandboxError(f"cannot list the image's Python files (exit {result.exit_code}, "
                           f"{result.output[-200:]!r})")
    files: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(result.output)), mode="r:gz") as tar:
        for member in tar:
            handle = tar.extractfile(member) if member.isfile() else None
            if handle is None:
                continue
            path, data = "/" + member.name.lstrip("/"), handle.read()
            if path.endswith(ARCHIVES):
                files.update(_archived(path, data))
            else:
                files[path] = data
    return files


def _archived(path: str, data: bytes) -> Iterator[tuple[str, bytes]]:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for name in archive.namelist():
                if name.endswith((".py", ".pyw")):
                    yield f"{path}!{name}", archive.read(name)
    except (zipfile.BadZipFile, OSError, ValueError, RuntimeError):
        return


# (content hash, path) -> the file's functions: parsed once, and each function's digest and
# identifiers computed once, for every candidate of the image and every image holding the file
_PARSED: dict[tuple[str, str], list[Function]] = {}
_PARSED_MAX = 200_000


def _functions(path: str, data: bytes) -> list[Function]:
    key = (hashlib.sha1(data).hexdigest(), path)
    found = _PARSED.get(key)
    if found is None:
        found = normast.functions(data.decode("utf-8", errors="replace"), path)
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.clear()
        _PARSED[key] = found
    return found


def _needles(gold: Gold) -> tuple[bytes, list[bytes]]:
    """What a file holding a copy must mention: the function's name (its class's for a
    dunder method; nothing when shorter than 4 letters), or most of its rarer identifiers
    (the longest), as they appear in text."""
    names = [n for n in gold.fixed.qualname.split(".") if n != "<locals>"]
    name = next((n for n in reversed(names) if not n.startswith("__")), "")
    words = sorted({t.split(":", 1)[1] for t in gold.fixed.identifiers}, key=lambda w: -len(w))
    return (name.encode() if len(name) >= 4 else b""), [w.encode() for w in words
                                                         if len(w) >= 6][:6]


def _worth_parsing(data: bytes, needles: list[tuple[bytes, list[bytes]]]) -> bool:
    for name, words in needles:
        if name and name in data:
            return True
        if words and 2 * sum(w in data for w in words) >= len(words):
            return True
    return False


# ---------------------------------------------------------------------------- the comparison


def find_copies(golds: list[Gold], files: dict[str, bytes], config: LeakConfig,
                owned: frozenset[str] = frozenset()) -> list[Copy]:
    """The functions of ``files`` that are copies of a gold function (see the module
    docstring), most similar first. ``owned``: the repository's own files (``/testbed/...``,
    see :func:`owned_files`), which are context and never copies."""
    if not golds:
        return []
    needles = [_needles(g) for g in golds]
    index = Index()
    for path, data in files.items():
        if path.split("!", 1)[0] in owned:
            continue
        if _worth_parsing(data, needles):
            index.add(_functions(path, data))
    copies: dict[tuple[str, str], Copy] = {}
    for gold in golds:
        namesakes = {index.functions[i].path.split("!", 1)[0]
                     for i in index.by_name.get(gold.fixed.tail, ())}
        conventional = len(namesakes - {f"{WORKDIR}/{gold.file}"}) >= config.convention
        for fn in index.candidates(gold.fixed):
            if fn.path == f"{WORKDIR}/{gold.file}" and fn.qualname == gold.fixed.qualname:
                continue  # the place the agent must write to
            copy = _judge(gold, fn, config, conventional)
            key = (fn.path, fn.qualname)
            if copy is not None and (key not in copies or copies[key].similarity < copy.similarity):
                copies[key] = copy
    return sorted(copies.values(), key=lambda c: (-c.similarity, c.path, c.qualname))


def _judge(gold: Gold, fn: Function, config: LeakConfig, conventional: bool = False
           ) -> Copy | None:
    fixed = gold.fixed
    lo, hi = sorted((len(fixed.tokens), len(fn.tokens)))
    if hi == 0 or 2 * lo / (lo + hi) < config.same_library:
        return None  # difflib's ratio cannot reach any threshold
    score = 1.0 if fn.digest == fixed.digest else similarity(fixed.tokens, fn.tokens)
    rule = _rule(gold, fn, score, config, conventional)
    if rule is None:
        return None
    if gold.broken is not None and similarity(gold.broken.tokens, fn.tokens) >= score:
        return None  # as like the unfixed code: the repository's own, or a copy of it
    if gold.broken is not None and held(gold, fn) < config.holds_change:
        return None  # alike, but without the fix: an older or a relative of the function
    return Copy(gold.label, fn.path, fn.qualname, round(score, 3), rule)


def held(gold: Gold, fn: Function) -> float:
    """How much of the patch's change to the function ``fn`` holds: of the tokens the patch
    wrote, those ``fn`` has at their place (aligned with the fixed function), and of those it
    took out, those ``fn`` lacks (aligned with the unfixed one). A function closer to the
    fixed one than to the unfixed one can still lack the fix: pytest-9359's fix adds a loop
    over decorators to ``get_statement_startend2``, and the older ``py`` library's copy, without
    it, came out closer to the fixed one (0.84 against 0.79): the loop's new local renumbers the
    later ones, and the ``py`` copy's own extra local numbers them as the fixed one does."""
    assert gold.broken is not None
    broken, fixed = gold.broken.tokens, gold.fixed.tokens
    change = SequenceMatcher(None, broken, fixed, autojunk=False).get_matching_blocks()
    # a local's normalised name is its number (``N:v4``): a local the fix adds renumbers the
    # later ones, which is no part of the change, and a relative that happens to number them
    # alike (pytest-9359's) would hold it
    written = {j for j in range(len(fixed)) if not _LOCAL.match(fixed[j])} - {
        b + k for _a, b, n in change for k in range(n)}
    removed = {i for i in range(len(broken)) if not _LOCAL.match(broken[i])} - {
        a + k for a, _b, n in change for k in range(n)}
    if not written and not removed:
        return 1.0  # the same tokens: nothing tells a copy of one from the other

    def aligned(tokens: tuple[str, ...]) -> set[int]:
        blocks = SequenceMatcher(None, tokens, fn.tokens, autojunk=False).get_matching_blocks()
        return {a + k for a, _b, n in blocks for k in range(n)}

    has = len(written & aligned(fixed)) + len(removed - aligned(broken))
    return has / (len(written) + len(removed))


def _rule(gold: Gold, fn: Function, score: float, config: LeakConfig,
          conventional: bool = False) -> str | None:
    if score == 1.0 and fn.digest == gold.fixed.digest:
        return "exact"
    if score >= config.near and len(gold.fixed.tokens) >= 2 * config.min_tokens:
        return "near"  # small functions of one shape (decorators, shims) are alike anyway
    qualname = gold.fixed.qualname
    generic = conventional or ("." not in gold.fixed.tail and gold.fixed.name.startswith("__"))
    if fn.tail == gold.fixed.tail and score >= config.same_name and not generic:
        return "same name"  # a module's __getattr__ is everybody's __getattr__
    where = PurePosixPath(fn.path.replace("!", "/"))
    package = gold.package
    in_package = package in where.parts[:-1] or where.stem == package
    if fn.qualname == qualname and in_package and score >= config.same_library:
        return "same library"
    return None


def owned_files(task: Task) -> frozenset[str]:
    """The files the task's repository holds at its base commit, as the image's paths
    (``/testbed/...``); empty when the task has no source to read them from (every file is
    then checked)."""
    if not task.source:
        return frozenset()
    return frozenset(f"{WORKDIR}/{p}" for p in tree_paths(task.source, task.base_commit))


# ---------------------------------------------------------------------------- in Docker


def copies_in_image(task: Task, config: LeakConfig | None = None) -> list[Copy]:
    """The copies of ``task``'s gold code that its image holds (the image is built if needed).
    """
    config = config or LeakConfig()
    if not patched_files(task.patch):
        return []
    image = ensure_image(task, progress=lambda _m: None)
    box_config = SandboxConfig(image=image.tag, role="leak-check", **Grader().container_config())
    with DockerSandbox(box_config) as box:
        files = image_files(box, config)
    before = {p: files[f"{WORKDIR}/{p}"].decode("utf-8", errors="replace")
              for p in patched_files(task.patch) if f"{WORKDIR}/{p}" in files}
    return find_copies(gold_functions(task.patch, before, config), files, config,
                       owned_files(task))


def leak_reason(copies: list[Copy]) -> str:
    shown = "; ".join(str(c) for c in copies[:3])
    more = f" and {len(copies) - 3} more" if len(copies) > 3 else ""
    return f"leak: the image already holds the gold code: {shown}{more}"


def leak_guard(config: LeakConfig | None = None) -> Callable[[Task], str | None]:
    """For the task sources: the reason a candidate is rejected for a leak, or None. An image
    that does not build is left to validation (which says why); the engine failing is an
    ``infrastructure`` rejection like any other."""
    def guard(task: Task) -> str | None:
        try:
            found = copies_in_image(task, config)
        except (ImageBuildError, TaskError):
            return None
        except RepogymError as exc:
            return f"infrastructure: {str(exc).splitlines()[0][:200]}"
        return leak_reason(found) if found else None

    return guard
