"""Where the calls an operation wrapper passed on cost their time (kinds.PASSED_CALL).

A wrapper passes a call on when the operation of its name is open on the thread already
(a marked env class's ``step`` inside the user's own ``simulation``): nothing is recorded,
the process only counts them per operation (format.META_PASSED_CALLS). Each was paid
inside an operation of that name, so the count's cost is put before the ends of that
operation's intervals, spread evenly over them (the process's, every thread's): each
interval shrinks by its share.
"""

from __future__ import annotations

import numpy as np

from rlscope.analysis.overhead.kinds import passed_calls
from rlscope.trace import format as fmt
from rlscope.trace.data import ProcessTrace


def costs(p: ProcessTrace, cost_ns: float) -> np.ndarray | None:
    """Extra pre-stamp cost (ns) of each of ``p``'s events; None when nothing is charged."""
    counts = passed_calls(p)
    ev = p.events
    if not counts or not cost_ns > 0 or not len(ev):
        return None
    ends = ev.kind == fmt.OPERATION_END
    extra = np.zeros(len(ev))
    for op, n in counts.items():
        ids = [i for i, s in enumerate(p.strings) if s == op]
        at = ends & np.isin(ev.name, ids)
        k = int(at.sum())
        if k:
            extra[at] += n * cost_ns / k
    return extra if extra.any() else None
