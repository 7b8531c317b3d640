"""Calls the operation wrappers passed on without recording anything: the operation of
their name was open on the thread already (a marked env class's ``step`` inside the
user's own ``simulation``, a SB3 policy's ``forward`` inside ``predict``). Each still
costs the wrapper's call (a call from C into the Python method, which the interpreter
would otherwise have inlined: 14-95 ns around a real env step here), and no event marks
it, so each wrapper counts them (the native OpWrapper's ``_rlscope_passed``, under the
GIL) and this module writes the counts per operation name when a recording stops
(format.META_PASSED_CALLS), for overhead correction (kinds.PASSED_CALL)."""

from __future__ import annotations

import os
import weakref
from typing import Any

from rlscope import annotate
from rlscope.trace import format as fmt

_wrappers: weakref.WeakSet[Any] = weakref.WeakSet()


def register(wrapper: Any) -> Any:
    """Count ``wrapper``'s passed calls (an operation wrapper of either recorder)."""
    try:
        _wrappers.add(wrapper)
    except TypeError:  # not weak-referenceable: its calls go uncounted
        pass
    return wrapper


def taken() -> dict[str, int]:
    """The calls passed on since the last time, per operation name; the counts are
    cleared."""
    out: dict[str, int] = {}
    for w in list(_wrappers):
        n = int(getattr(w, "_rlscope_passed", 0) or 0)
        if n:
            op = str(getattr(w, "_rlscope_op", ""))
            out[op] = out.get(op, 0) + n
            w._rlscope_passed = 0
    return out


def _publish_at_stop(rec: Any) -> None:
    counts = taken()
    if counts:
        import json

        rec.metadata(fmt.META_PASSED_CALLS, json.dumps(counts))


def _clear_in_child() -> None:
    taken()  # a forked child's trace holds its own calls only


annotate.before_stop(_publish_at_stop)
os.register_at_fork(after_in_child=_clear_in_child)
