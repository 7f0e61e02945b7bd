"""Scripts that ship inside the package (``.sh`` and ``.py`` files run in containers), read
as package resources: each is a file that shellcheck or ruff checks, never a Python string."""

from __future__ import annotations

import functools
from importlib.resources import files


@functools.cache
def script(package: str, name: str, bare: bool = False) -> str:
    """The text of the file ``name`` of ``package``. ``bare`` leaves out blank lines and lines
    that are comments only: for a script that a shell reads from a pipe, one byte at a time.
    (A script read bare must hold no multi-line string with such lines.)"""
    text = files(package).joinpath(name).read_text(encoding="utf-8")
    if not bare:
        return text
    kept = [line for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]
    return "\n".join(kept) + "\n"
