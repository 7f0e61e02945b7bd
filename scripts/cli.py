"""The `repogym` command line: thin commands that parse arguments and call the packages."""

from __future__ import annotations

import argparse
import importlib
import sys

from repogym.errors import RepogymError
from repogym.version import __version__

# command name -> module providing add_parser(subparsers) (each sets its own `func`)
COMMANDS = {
    "doctor": "repogym.scripts.doctor",
    "images": "repogym.scripts.images_cmd",
    "tasks": "repogym.scripts.tasks_cmd",
    "eval": "repogym.scripts.eval_cmd",
    "show": "repogym.scripts.show",
    "bench": "repogym.scripts.bench",
    "train": "repogym.scripts.train",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="repogym",
        description="A Gymnasium environment for coding agents on real repositories.",
    )
    parser.add_argument("--version", action="version", version=f"repogym {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in COMMANDS.items():
        try:
            mod = importlib.import_module(module)
        except ImportError as exc:  # an optional extra (train) may be missing
            missing = sub.add_parser(name, help=f"(unavailable: {exc})")
            missing.set_defaults(func=_unavailable(name, exc))
            continue
        add = getattr(mod, "add_parser", None) or getattr(mod, f"add_{name}_parser", None)
        if add is None:
            raise RuntimeError(f"{module} has no add_parser(subparsers)")
        add(sub)
    return parser


def _unavailable(name: str, exc: ImportError):  # type: ignore[no-untyped-def]
    def run(_args: argparse.Namespace) -> int:
        print(
            f"repogym {name} needs more packages ({exc}): pip install 'repogym[train]'",
            file=sys.stderr,
        )
        return 2

    return run


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except RepogymError as exc:
        print(f"repogym: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("repogym: interrupted", file=sys.stderr)
        return 130
