"""``python -m minicalc``: evaluate expressions given as arguments or read from stdin."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TextIO

from minicalc.errors import CalcError, CalcSyntaxError
from minicalc.session import Session

__all__ = ["main"]


def main(
    argv: Sequence[str] | None = None,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
) -> int:
    """Evaluates each argument (or each non-blank stdin line) in one session.

    Prints one result per expression. Returns 0 when every expression worked and 1
    otherwise; errors are printed in place of the result and do not stop the session.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    lines = args or list(stdin or sys.stdin)
    out = stdout or sys.stdout
    session = Session()
    status = 0
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            print(session.display(line), file=out)
        except CalcSyntaxError as error:
            print(f"error: {error}", file=out)
            for pointer_line in error.pointer().splitlines():
                print(f"    {pointer_line}", file=out)
            status = 1
        except CalcError as error:
            print(f"error: {error}", file=out)
            status = 1
    return status
