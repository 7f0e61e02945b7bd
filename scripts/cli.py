"""The `repogym` command line: thin commands that parse arguments and call the packages.

A command's module is imported only when that command runs (or shows its help): the grader
pulls in swebench and the environment Gymnasium and Docker, and `repogym --help` needs none
of them. Every failure ends the same way: one `repogym: error: ...` line and a non-zero exit.

Exit status, one rule for every command (:func:`exit_status`):

- 0: it did its job;
- 1: it could not do its job (no Docker engine, an image that does not build, `tasks add`
  that kept nothing, an evaluation whose tasks failed for infrastructure, a certificate that is
  not a pass);
- 2: bad input: a bad flag or value, a missing or malformed file, an unknown name (suite,
  task, agent, split, source);
- 130: interrupted (Ctrl-C); 141 when the reader of its output went away (`... | head`).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable

from repogym import settings
from repogym.errors import RepogymError, UsageError
from repogym.version import __version__

OK, FAILED, BAD_INPUT, INTERRUPTED, PIPE_CLOSED = 0, 1, 2, 130, 141

# command name -> (module with add_parser(subparsers), one line for `repogym --help`)
COMMANDS: dict[str, tuple[str, str]] = {
    "doctor": ("repogym.scripts.doctor",
               "check Docker, images and their disk use, disk; remove leftovers"),
    "images": ("repogym.scripts.images_cmd",
               "build the images a suite needs; prune them to a disk budget"),
    "tasks": ("repogym.scripts.tasks_cmd", "validate suites, make tasks from repositories"),
    "eval": ("repogym.scripts.eval_cmd", "run an agent on a suite, or grade SWE-bench predictions"),
    "swebench": ("repogym.scripts.swebench_cmd",
                 "build, validate and grade a SWE-bench file whole (resumable)"),
    "show": ("repogym.scripts.show", "print an episode record readably"),
    "bench": ("repogym.scripts.bench",
              "measure start-up, step, reset and grading latency, throughput, memory"),
    "train": ("repogym.scripts.train", "train an LLM agent with multi-turn PPO"),
    "gateway": ("repogym.scripts.gateway_cmd",
                "OpenAI-compatible recording proxy, one base URL per episode"),
    "serve": ("repogym.scripts.serve_cmd", "serve the environment over OpenEnv's protocol"),
}

DEBUG_VAR = settings.DEBUG.name  # set to 1 to see the traceback of an unexpected error


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser; only the command named in ``argv`` (if any) gets its real subparser."""
    parser = argparse.ArgumentParser(
        prog="repogym",
        description="A Gymnasium environment for coding agents on real repositories.",
        epilog=f"`repogym COMMAND --help` describes a command. {DEBUG_VAR}=1 shows the "
        "traceback of an unexpected error.",
    )
    parser.add_argument("--version", action="version", version=f"repogym {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = _command_in(sys.argv[1:] if argv is None else argv)
    for name, (module, help_text) in COMMANDS.items():
        if name == chosen:
            _add_command(sub, name, module, help_text)
        else:
            sub.add_parser(name, help=help_text)
    return parser


def _command_in(argv: list[str]) -> str | None:
    """The command word: the first argument that is not an option (the top level has only
    ``--help`` and ``--version``, which take no value)."""
    return next((a for a in argv if not a.startswith("-")), None)


def _add_command(sub: argparse._SubParsersAction, name: str, module: str, help_text: str) -> None:
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:  # an optional extra (train) may be missing
        if (exc.name or "").split(".")[0] == "repogym":  # the package itself is incomplete
            raise BrokenInstall(
                f"repogym {name}: this installation of repogym lacks its own module "
                f"{exc.name} (an editable install made before the checkout gained it?): "
                "install it again (pip install -e . in the checkout, or pip install "
                "repogym)") from exc
        missing = sub.add_parser(name, help=f"{help_text} (unavailable: {exc})")
        missing.set_defaults(func=_unavailable(name, exc))
        return
    add = getattr(mod, "add_parser", None) or getattr(mod, f"add_{name}_parser", None)
    if add is None:
        raise RuntimeError(f"{module} has no add_parser(subparsers)")
    add(sub)


def _unavailable(name: str, exc: ImportError) -> Callable[[argparse.Namespace], int]:
    def run(_args: argparse.Namespace) -> int:
        raise MissingExtra(f"repogym {name} needs more packages ({exc}): "
                           "pip install 'repogym[train]'")

    return run


class MissingExtra(Exception):
    """A command's optional dependencies are not installed."""


class BrokenInstall(Exception):
    """A module of repogym itself does not import: the installation is out of date."""


def main(argv: list[str] | None = None) -> int:
    try:
        parser = build_parser(argv)
    except BrokenInstall as exc:
        print(f"repogym: error: {exc}", file=sys.stderr)
        return FAILED
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return BAD_INPUT
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("repogym: interrupted", file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError:  # `repogym show FILE | head`: the reader left, nothing to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit
        return PIPE_CLOSED
    except SystemExit:
        raise
    except BaseException as exc:  # noqa: BLE001 - one error line, never a traceback
        return report_error(exc)


def exit_status(exc: BaseException) -> int:
    """The exit status for an error (see the module docstring): bad input is a
    :class:`~repogym.errors.UsageError` (a malformed or missing task or suite is one), a
    ``ValueError`` (a bad value, a file that does not parse) or a file that does not exist;
    anything else means the command could not do its job."""
    if isinstance(exc, KeyboardInterrupt):
        return INTERRUPTED
    if isinstance(exc, UsageError | ValueError | FileNotFoundError | NotADirectoryError):
        return BAD_INPUT
    return FAILED


def report_error(exc: BaseException) -> int:
    """Prints ``repogym: error: ...`` for ``exc`` and returns the exit status."""
    code = exit_status(exc)
    if isinstance(exc, RepogymError | MissingExtra | ValueError):
        message = str(exc)
    elif isinstance(exc, OSError) and exc.filename is not None:
        message = f"{exc.filename}: {exc.strerror or exc}"
    elif type(exc).__module__.split(".")[0] in ("docker", "requests", "urllib3"):
        message = f"the Docker engine failed: {exc} (run `repogym doctor` to check it)"
    else:
        message = (f"unexpected {type(exc).__name__}: {exc} (a bug in repogym; "
                   f"{DEBUG_VAR}=1 shows the traceback)")
    print(f"repogym: error: {message}", file=sys.stderr)
    if settings.DEBUG.get():
        import traceback

        traceback.print_exception(exc)
    return code
