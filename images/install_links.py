"""Copies that an image's install made of the repository's own files become links to them.

``setup.py``'s ``scripts=['bin/jp.py']`` (jmespath) copies the script into the environment's
``bin/``; ``data_files`` copy files elsewhere under the environment. Such a copy holds the code
of the commit the image was built at: where a task removes or breaks a function of that file,
the copy is the gold code, readable by the agent (the leak check rejected two of jmespath's
candidates for it). So after the setup, every Python file under the environment's prefix
(outside its site-packages, which :mod:`repogym.tasks.checking` handles on its own) whose text
is a repository file's, the first line aside when the install rewrote a ``#!`` line, is replaced
by a symbolic link to that file: it then holds what /testbed holds, whatever an agent changes.
A link keeps the copy's executable bit by giving it to the repository's file.

This file runs inside the image's build container, with the environment's Python (3.8 and
later, standard library only): ``python install_links.py /testbed`` prints one
``REPOGYM-LINKED [...]`` line.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import sysconfig

MAX_BYTES = 4 << 20  # larger files are no script an install copies
SUFFIXES = (".py", ".pyw")


def _body(data: bytes) -> bytes:
    """The text an install leaves alone: all of it but a first ``#!`` line (pip and setuptools
    rewrite a script's ``#!python`` to the environment's interpreter)."""
    if data.startswith(b"#!"):
        return data.partition(b"\n")[2]
    return data


def _read(path: str) -> bytes | None:
    try:
        if os.path.islink(path) or not os.path.isfile(path) or os.path.getsize(path) > MAX_BYTES:
            return None
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def repository_files(workdir: str) -> dict[bytes, str]:
    """The repository's Python files by their text (as :func:`_body` reads it)."""
    out = subprocess.run(["git", "-C", workdir, "ls-files", "-z"], capture_output=True,
                         check=True).stdout
    found: dict[bytes, str] = {}
    for name in out.decode("utf-8", "surrogateescape").split("\0"):
        if not name.endswith(SUFFIXES):
            continue
        path = os.path.join(workdir, name)
        data = _read(path)
        if data is not None and _body(data).strip():
            found.setdefault(_body(data), path)
    return found


def _skipped_dirs() -> set[str]:
    paths = sysconfig.get_paths()
    return {os.path.realpath(paths[k]) for k in ("purelib", "platlib") if k in paths}


def link_copies(workdir: str, prefix: str) -> list[tuple[str, str]]:
    """Replaces the copies (see the module docstring) under ``prefix``; returns (copy, file)
    pairs."""
    known = repository_files(workdir)
    if not known:
        return []
    skipped, root = _skipped_dirs(), os.path.realpath(workdir)
    linked = []
    for folder, dirs, files in os.walk(prefix):
        real = os.path.realpath(folder)
        dirs[:] = [d for d in dirs if os.path.realpath(os.path.join(folder, d)) not in skipped
                   and d != "__pycache__"]
        if real == root or real.startswith(root + os.sep):
            continue
        for name in files:
            path = os.path.join(folder, name)
            if not name.endswith(SUFFIXES):
                continue
            data = _read(path)
            target = known.get(_body(data)) if data is not None else None
            if target is None:
                continue
            mode = os.stat(path).st_mode
            if mode & stat.S_IXUSR:
                os.chmod(target, os.stat(target).st_mode | stat.S_IXUSR | stat.S_IXGRP
                         | stat.S_IXOTH)
            os.unlink(path)
            os.symlink(target, path)
            linked.append((path, target))
    return linked


def main(argv: list[str]) -> int:
    # only a virtual environment's own prefix: outside one, the prefix holds the standard
    # library, which no repository file may replace
    venv = sys.prefix != getattr(sys, "base_prefix", sys.prefix)
    linked = link_copies(argv[1], sys.prefix) if venv else []
    print("REPOGYM-LINKED " + json.dumps(linked), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
