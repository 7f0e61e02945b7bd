"""Measures the package's structure: the figures of the architecture page.

    .venv/bin/python tools/measure_structure.py            # a table
    .venv/bin/python tools/measure_structure.py --json     # the same as JSON

Every figure comes from the source (an AST walk over every module of the ``repogym`` package,
found through setup.cfg's ``package_dir``), none from a list kept by hand:

- ``upward``: import edges from a module to one of a higher layer (``LAYERS``, bottom first;
  a module belongs to the first layer whose prefix it has), and pairs of top-level folders
  that import each other;
- ``lazy``: imports inside functions, and how many say why (a comment on the line or on the
  line above it);
- ``cycles``: strongly connected groups of modules in the import graph (lazy imports count);
- ``names``: file names (``base.py``) that more than one module of the package uses.
"""

from __future__ import annotations

import argparse
import ast
import configparser
import json
import sys
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP = ("tasks/demo/", "tasks/adversarial/", "tasks/data/", "agents/attacks/payloads/")

# The floor plan, bottom first: a module may import from its own layer and those below it.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("core", ("repogym.errors", "repogym.settings", "repogym.progress", "repogym.version",
              "repogym.resources", "repogym.tls", "repogym.schema", "repogym.suite",
              "repogym.repo", "repogym.ray_cluster")),
    ("sandbox", ("repogym.sandbox",)),
    ("images", ("repogym.images",)),
    ("grading", ("repogym.envs.grading",)),
    ("env", ("repogym.envs",)),
    ("creation", ("repogym.tasks",)),
    # the agent seam (its Protocol and its name table of "module:Class" strings) is what
    # evaluation runs agents through, as gymnasium's registry makes envs from strings
    ("evaluation", ("repogym.agents.evaluation", "repogym.agents.agent",
                    "repogym.agents.registry")),
    ("agents", ("repogym.agents",)),
    ("cli", ("repogym.scripts", "repogym.bench")),
    # what the contract asks of the package's root: `import repogym` registers the
    # environment, `python -m repogym` is the command line
    ("entry", ("repogym", "repogym._register", "repogym.__main__")),
)
# creation and evaluation stand beside each other: neither is above the other
BESIDE = {frozenset(("creation", "evaluation"))}
TOP_FOLDERS = ("envs", "tasks", "agents", "scripts", "bench", "images", "sandbox")


@dataclass
class Module:
    name: str
    path: Path
    imports: list[tuple[str, bool, bool]] = field(default_factory=list)  # (target, lazy, said)


def package_dirs() -> dict[str, Path]:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    dirs = {}
    for line in config["options"]["package_dir"].strip().splitlines():
        name, _, folder = (part.strip() for part in line.partition("="))
        dirs[name] = ROOT / folder
    return dirs


def modules() -> dict[str, Module]:
    found: dict[str, Module] = {}
    dirs = package_dirs()
    for package, folder in sorted(dirs.items(), key=lambda kv: -kv[0].count(".")):
        for path in folder.rglob("*.py"):
            rel = path.relative_to(ROOT).as_posix()
            if any(rel.startswith(s) for s in SKIP) or ".venv" in path.parts:
                continue
            parts = path.relative_to(folder).with_suffix("").parts
            name = ".".join((package, *parts))
            name = name.removesuffix(".__init__") if parts[-1] == "__init__" else name
            if name not in found and not _claimed(path, dirs, package):
                found[name] = Module(name, path)
    return found


def _claimed(path: Path, dirs: dict[str, Path], package: str) -> bool:
    """Whether a deeper mapping of package_dir owns ``path`` (e.g. envs/ under repogym)."""
    return any(other != package and other.startswith(package + ".") and
               dirs[other] in path.parents for other in dirs)


def read_imports(module: Module, known: set[str]) -> None:
    source = module.path.read_text(encoding="utf-8")
    lines = source.splitlines()
    tree = ast.parse(source)
    package = module.name if module.path.name == "__init__.py" else module.name.rpartition(".")[0]
    lazy_nodes = {id(n) for f in ast.walk(tree)
                  if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
                  for n in ast.walk(f) if isinstance(n, ast.Import | ast.ImportFrom)}
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and "TYPE_CHECKING" in ast.unparse(node.test)
                   for n in ast.walk(node) if isinstance(n, ast.Import | ast.ImportFrom)}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom) or id(node) in typing_only:
            continue
        targets = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                up = package.split(".")
                up = up[: len(up) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                       for a in node.names]
        lazy = id(node) in lazy_nodes
        said = lazy and _said(lines, node.lineno)
        for name in targets:
            target = _owner(name, known)
            if target and target != module.name:
                module.imports.append((target, lazy, said))


def _said(lines: list[str], lineno: int) -> bool:
    line = lines[lineno - 1]
    above = lines[lineno - 2].strip() if lineno >= 2 else ""
    return "#" in line or above.startswith("#")


def _owner(name: str, known: set[str]) -> str | None:
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def layer_of(name: str) -> int:
    """The layer whose longest prefix ``name`` has (-1: none)."""
    best, found = -1, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (name == p or name.startswith(p + ".")) and len(p) > best:
                best, found = len(p), i
    return found


def folder_of(name: str) -> str:
    """The top-level folder of the checkout that holds ``name`` (``repogym`` for the core)."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in TOP_FOLDERS else "repogym"


def cycles(mods: dict[str, Module]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    graph = {m: sorted({t for t, _, _ in mod.imports}) for m, mod in mods.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, []):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


@dataclass
class Structure:
    modules: int
    lines: int
    upward: list[str]
    mutual_folders: list[str]
    lazy_imports: int
    lazy_with_reason: int
    cycles: list[list[str]]
    names_used_twice: dict[str, int]
    unplaced: list[str]


def measure() -> Structure:
    mods = modules()
    known = set(mods)
    for mod in mods.values():
        read_imports(mod, known)
    names = [LAYERS[i][0] for i in range(len(LAYERS))]
    upward: list[str] = []
    folders: dict[tuple[str, str], int] = defaultdict(int)
    lazy = said = 0
    for mod in mods.values():
        for target, is_lazy, is_said in mod.imports:
            lazy += is_lazy
            said += is_said
            a, b = layer_of(mod.name), layer_of(target)
            # `import repogym` registers the environment: how a user reaches it, from anywhere
            if a >= 0 and b > a and names[b] != "entry" and \
                    frozenset((names[a], names[b])) not in BESIDE:
                upward.append(f"{mod.name} ({names[a]}) -> {target} ({names[b]})")
            fa, fb = folder_of(mod.name), folder_of(target)
            if fa != fb and names[a] != "entry":
                folders[(fa, fb)] += 1
    mutual = sorted(f"{a} <-> {b} ({folders[(a, b)]} and {folders[(b, a)]})"
                    for (a, b) in folders if a < b and (b, a) in folders)
    files = Counter(m.path.name for m in mods.values() if m.path.name != "__init__.py")
    twice = {n: c for n, c in sorted(files.items()) if c > 1}
    unplaced = sorted(m for m in mods if layer_of(m) < 0)
    return Structure(len(mods), sum(len(m.path.read_text().splitlines()) for m in mods.values()),
                     sorted(upward), mutual, lazy, said, cycles(mods), twice, unplaced)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--all", action="store_true", help="list every upward edge")
    args = parser.parse_args()
    data = measure()
    if args.json:
        print(json.dumps(asdict(data), indent=2))
        return 0
    print(f"modules {data.modules}, lines {data.lines}")
    print(f"upward import edges: {len(data.upward)}")
    for edge in data.upward if args.all else data.upward[:15]:
        print(f"  {edge}")
    print(f"top-level folders importing each other: {data.mutual_folders}")
    print(f"imports inside functions: {data.lazy_imports} ({data.lazy_with_reason} with a reason)")
    print(f"module cycles: {len(data.cycles)}")
    for group in data.cycles:
        print(f"  {' -> '.join(group)}")
    print(f"file names used twice or more: {len(data.names_used_twice)} "
          f"{sorted(data.names_used_twice)}")
    if data.unplaced:
        print(f"modules in no layer: {data.unplaced}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
