"""Warm-up apart (docs/analysis.md#warm-up): an operation whose first calls are slower
than its steady state (allocator growth, lazy initialisation, cache misses, compiling)
gets them reported apart, and the extrapolation's rate starts after them.

From the first calls the sweep keeps (engine.firstcalls, at most KEEP per thread, phase
and operation): the steady call is the median of the later half of those calls; the
warm-up is the calls up to the last one that took more than :data:`RATIO` times that
with at least :data:`MIN_CALLS` kept calls after it (a slow call among the last few is a
loaded machine's descheduling, not the warm-up's end), when the first call is one of
them and its calls took :data:`RATIO` times as many steady calls in all (slow calls
scattered through the window are noise too); it is reported when it
cost, above that many steady calls, at least :data:`MIN_S` and :data:`MIN_SHARE` of the
operation's time.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from rlscope.analysis.engine.compiles import union_ns
from rlscope.analysis.engine.firstcalls import KEEP
from rlscope.analysis.engine.paths import FIRST_OPERATION_ID
from rlscope.analysis.engine.process import ProcessResult

RATIO = 2.0  # a first call over this many steady calls is still warming up
MIN_S = 0.005  # seconds above the steady state for a warm-up to be reported...
MIN_SHARE = 0.05  # ...and this share of the operation's time (all its calls)
MIN_CALLS = 4  # calls kept before the steady state is judged; steady calls after a warm-up

COLUMNS = ["pid", "session", "process", "phase", "operation", "warmup_calls", "warmup_s",
           "steady_call_s", "excess_s", "share", "compile_s", "begin_ns", "end_ns"]


def warmup_table(results: Sequence[ProcessResult], sessions: Sequence[int],
                 names: Sequence[str], path_names: np.ndarray, phase_names: np.ndarray,
                 wall: dict[tuple[int, int, str, str], float],
                 compiles: pd.DataFrame) -> pd.DataFrame:
    """One row per operation with a warm-up (the rule above): its first ``warmup_calls``
    calls took ``warmup_s`` (inclusive), ``excess_s`` more than as many steady calls of
    ``steady_call_s``; ``share``: excess of the operation's wall time (``wall``: by pid,
    session, phase, operation); ``compile_s``: compiling inside those calls; ``end_ns``:
    where the last warm-up call ended."""
    out = []
    for r, n, name in zip(results, sessions, names, strict=True):
        fc = r.first_calls
        if not len(fc):
            continue
        for (ph, pa), g in pd.DataFrame(fc[:, 1:], columns=["phase", "path", "b", "d"]) \
                .groupby(["phase", "path"], sort=False):
            if pa < FIRST_OPERATION_ID or len(g) < MIN_CALLS:
                continue
            g = g.sort_values("b", kind="stable").head(KEEP)  # threads merged
            d = g["d"].to_numpy(np.int64)
            steady = float(np.median(d[len(d) // 2:]))
            slow = np.flatnonzero(d > RATIO * steady)
            if not len(slow) or slow[0] != 0:
                continue  # a warm-up starts at the first call
            slow = slow[slow < len(d) - MIN_CALLS]  # steady calls must follow it
            if not len(slow):
                continue
            k = int(slow[-1]) + 1
            warm = int(d[:k].sum())
            if warm < RATIO * k * steady:
                continue  # slow calls scattered over the window: noise, not a warm-up
            excess = (warm - k * steady) / 1e9
            op, phase = str(path_names[pa]), str(phase_names[ph])
            total = wall.get((r.pid, n, phase, op), 0.0)
            if excess < MIN_S or total <= 0 or excess < MIN_SHARE * total:
                continue
            b = g["b"].to_numpy(np.int64)
            end = int(b[k - 1] + d[k - 1])
            comp = 0.0
            if len(compiles):
                c = compiles[(compiles["pid"] == r.pid) & (compiles["session"] == n)
                             & (compiles["operation"] == op) & (compiles["phase"] == phase)
                             & (compiles["begin_ns"] >= b[0]) & (compiles["begin_ns"] < end)]
                comp = union_ns(c["begin_ns"].to_numpy(np.int64),
                                np.minimum(c["end_ns"].to_numpy(np.int64), end)) / 1e9
            out.append((r.pid, n, name, phase, op, k, warm / 1e9, steady / 1e9, excess,
                        excess / total, comp, int(b[0]), end))
    return pd.DataFrame(out, columns=COLUMNS)
