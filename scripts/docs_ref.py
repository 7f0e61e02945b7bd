"""Reference pages of the manual made from the code, so they cannot drift from it.

``make docs`` fills three pages from here (``tools/docs_hooks.py`` puts the text where a page
says ``<!-- generated: NAME -->``):

- ``cli``: every command and subcommand's ``--help``, from the argparse parsers themselves;
- ``settings``: every ``REPOGYM_*`` variable, from :data:`repogym.settings.SETTINGS`;
- ``bench``: the latest ``repogym bench`` run, from ``docs/bench.json`` (the command, the machine
  and its load, every row and goal).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from typing import Any

from repogym import settings
from repogym.scripts.cli import COMMANDS, build_parser

WIDTH = "100"  # argparse wraps help to $COLUMNS: fixed, so the page is the same everywhere


Parser = argparse.ArgumentParser


def _subparsers(parser: Parser) -> Iterator[tuple[str, Parser, str]]:
    """Each subcommand: its name, its parser and its one line of help."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, sub, helps.get(name, "")


def _walk(prefix: str, parser: Parser, help_text: str) -> Iterator[tuple[str, Parser, str]]:
    yield prefix, parser, help_text
    for name, sub, sub_help in _subparsers(parser):
        yield from _walk(f"{prefix} {name}", sub, sub_help)


def cli_reference() -> str:
    """One section per command and subcommand: its one-line help and its ``--help``."""
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        out = []
        for name, (_module, help_text) in COMMANDS.items():
            top = next(p for n, p, _h in _subparsers(build_parser([name])) if n == name)
            for title, parser, line in _walk(f"repogym {name}", top, help_text):
                depth = "##" if title.count(" ") == 1 else "###"
                out += [f"{depth} `{title}`", "", line[:1].upper() + line[1:] + ".", "",
                        "```text", parser.format_help().rstrip(), "```", ""]
        return "\n".join(out)
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old


def settings_table() -> str:
    """Every setting: its name, default and what it does."""
    rows = ["| variable | default | what it does |", "| --- | --- | --- |"]
    for s in settings.SETTINGS:
        default = f"`{s.default}`" if s.default else "unset"
        rows.append(f"| `{s.name}` | {default} | {s.help} |")
    return "\n".join(rows)


def _number(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"
    return str(value)


def bench_tables(data: dict[str, Any]) -> str:
    """The run's command, machine and load, then its rows and its goals."""
    machine = data.get("machine") or {}
    start, end = machine.get("loadavg_start") or [], machine.get("loadavg_end") or []
    load = (f"{start[0]:.1f} at the start, {end[0]:.1f} at the end (1-minute load average)"
            if start and end else "not recorded")
    out = [f"Command: `{data.get('command', 'repogym bench')}` on task `{data.get('task')}` "
           f"({data.get('image')}).", "",
           f"Machine: {machine.get('cpus')} CPUs, {machine.get('platform')}, Python "
           f"{machine.get('python')}, Docker {machine.get('docker')}; load {load}; "
           f"{machine.get('seconds')} s in all.", "",
           "| row | measure | median | p10-p90 | n | ratio | note |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
    for row in data.get("rows") or []:
        stat = row.get("stat") or {}
        unit = row.get("unit", "")
        spread = (f"{_number(stat.get('p10'))}-{_number(stat.get('p90'))}"
                  if stat.get("p10") is not None else "")
        median = f"{_number(stat.get('median'))} {unit}" if stat.get("median") is not None else ""
        ratio = f"{row['ratio']:.2f}x" if isinstance(row.get("ratio"), int | float) else ""
        note = str(row.get("note") or "").replace("|", "/").replace("\n", " ")
        out.append(f"| `{row.get('key')}` | {row.get('name', '')} | {median} | {spread} | "
                   f"{stat.get('n', '')} | {ratio} | {note} |")
    goals = data.get("targets") or []
    if goals:
        out += ["", "| goal | measured | |", "| --- | --- | --- |"]
        for goal in goals:
            ratio = goal.get("ratio")
            measured = f"median {_number(goal.get('median'))}" + (
                f", ratio {ratio:.2f}x" if isinstance(ratio, int | float) else "")
            out.append(f"| {goal['goal']} | {measured} | {'met' if goal['met'] else 'missed'} |")
    return "\n".join(out)
