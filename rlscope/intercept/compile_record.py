"""One JIT compilation as one metadata record (docs/attribution.md#compile-time).

Compilers tell rlscope when they compile (rlscope.intercept.compilers); each compilation
becomes a record ``rlscope.compile:<n>`` whose value is
``[framework, function, begin_ns, end_ns, tid, reason, kind, counts, graph_breaks]``
(rlscope.trace.format.META_COMPILE_PREFIX): CLOCK_MONOTONIC times, the compiling
thread's native id (analysis finds the operation open on that thread then), the reason
the framework gave for a recompile ("" when it says none), the stage (``compile``,
``trace``, ``lower``, ``backward``...), whether the record is one compilation (1) or a
stage of one counted elsewhere (0), and the graph breaks it made. Nothing runs per
call: only when a compiler compiles.
"""

from __future__ import annotations

import itertools
import threading

from rlscope import annotate
from rlscope.trace.format import META_COMPILE_PREFIX

_seq = itertools.count()
MAX_REASON = 300  # characters of a reason kept (guard failures can be long)


def record(framework: str, function: str, begin_ns: int, end_ns: int, reason: str = "",
           kind: str = "compile", counts: bool = True, graph_breaks: int = 0) -> None:
    """Record one compilation (or stage) in the active recording; nothing without one.
    Never raises: a failed record must not fail the user's compile."""
    rec = annotate.active_recorder()
    if rec is None:
        return
    try:
        import json  # only when compiling: start-up imports no json

        value = json.dumps([framework, function, int(begin_ns), int(end_ns),
                            threading.get_native_id(), reason[:MAX_REASON], kind,
                            int(bool(counts)), int(graph_breaks)])
        rec.metadata(f"{META_COMPILE_PREFIX}{next(_seq)}", value)
    except Exception:
        pass
