"""A command line (a trace header's argv, run.json's command) shown as one shell line."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

_CONTROL = str.maketrans({"\\": "\\\\", "'": "\\'", "\n": "\\n", "\r": "\\r", "\t": "\\t"})


def quote(arg: str) -> str:
    """``arg`` quoted for a POSIX shell; one with newlines or tabs (a ``-c`` script) in
    bash's ``$'...'`` form, so the line stays one line and still pastes into bash."""
    if any(c in arg for c in "\n\r\t"):
        return "$'" + arg.translate(_CONTROL) + "'"
    return shlex.quote(arg)


def shell_line(argv: Sequence[str], limit: int | None = None) -> str:
    """The command as one line of quoted arguments, cut to ``limit`` characters (with
    "…") when given."""
    line = " ".join(quote(str(a)) for a in argv)
    if limit is not None and len(line) > limit:
        line = line[:limit - 1] + "…"
    return line
