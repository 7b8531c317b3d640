"""Compile time as its own measure (docs/attribution.md#compile-time): the compile
records joined to their operations (engine.compiles), per operation ``compile_s`` and
``compiles``, the recompile verdicts, and the compile time inside a window (the
extrapolation's steady rate leaves it out).

``compile_s`` is the union of the operation's compile intervals per thread (a stage
nested in another counts once), part of its self time (the categories still hold it:
compiling is Python and backend work); ``compiles`` counts compilations (records that
are one; JAX's tracing and lowering are stages of the XLA compilation that counts).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from rlscope.analysis.engine.compiles import union_ns
from rlscope.analysis.engine.paths import STARTUP
from rlscope.analysis.engine.process import ProcessResult

ROW_COLUMNS = ["pid", "session", "process", "thread", "phase", "operation", "path_id",
               "framework", "function", "kind", "counts", "begin_ns", "end_ns", "seconds",
               "reason", "graph_breaks"]
RECOMPILES = 3  # a function compiled this many times in one operation gets a verdict

FRAMEWORK_NAMES = {"torch": "torch.compile", "jax": "jax.jit", "tensorflow": "tf.function"}


def compile_rows(results: Sequence[ProcessResult], sessions: Sequence[int],
                 names: Sequence[str], path_names: np.ndarray,
                 phase_names: np.ndarray) -> pd.DataFrame:
    """One row per compile record, in begin order within each process."""
    rows = []
    for r, n, name in zip(results, sessions, names, strict=True):
        for c in r.compiles:
            rows.append((r.pid, n, name, c.thread, phase_names[c.phase],
                         path_names[c.path], c.path, c.framework, c.function, c.kind,
                         int(c.counts), c.begin_ns, c.end_ns, (c.end_ns - c.begin_ns) / 1e9,
                         c.reason, c.graph_breaks))
    return pd.DataFrame(rows, columns=ROW_COLUMNS)


def per_operation(rows: pd.DataFrame) -> pd.DataFrame:
    """(pid, session, phase, path_id) -> compile_s (the union of its intervals per
    thread, summed over threads), compiles, recompiles (compilations with a reason)."""
    out = []
    for key, g in rows.groupby(["pid", "session", "phase", "path_id"], sort=False):
        ns = sum(union_ns(t["begin_ns"].to_numpy(np.int64), t["end_ns"].to_numpy(np.int64))
                 for _, t in g.groupby("thread", sort=False))
        counted = g[g["counts"] == 1]
        out.append((*key, ns / 1e9, len(counted),
                    int((counted["reason"] != "").sum())))
    return pd.DataFrame(out, columns=["pid", "session", "phase", "path_id", "compile_s",
                                      "compiles", "recompiles"])


def compile_in(rows: pd.DataFrame, pid: int, session: int, lo_ns: int, hi_ns: int) -> float:
    """Seconds of compiling in the process between two times (per thread unions,
    summed; intervals clipped to the window)."""
    g = rows[(rows["pid"] == pid) & (rows["session"] == session)]
    total = 0
    for _, t in g.groupby("thread", sort=False):
        b = np.clip(t["begin_ns"].to_numpy(np.int64), lo_ns, hi_ns)
        e = np.clip(t["end_ns"].to_numpy(np.int64), lo_ns, hi_ns)
        total += union_ns(b, e)
    return total / 1e9


_SIZE = re.compile(r"size mismatch at index (\d+)\. expected (\d+), actual (\d+)")


def cause(framework: str, reasons: list[str]) -> tuple[str, str]:
    """(what varies, the remedy) from the reasons a framework gave for recompiling."""
    text = " ".join(reasons)
    m = _SIZE.search(text)
    if m:
        dim = int(m.group(1))
        what = ("input batch size varies" if dim == 0
                else f"input size varies (dimension {dim})")
        sizes = sorted({int(x) for r in reasons for mm in _SIZE.finditer(r)
                        for x in mm.groups()[1:]})
        if sizes:
            what += f" ({', '.join(map(str, sizes[:6]))}{'...' if len(sizes) > 6 else ''})"
        return what, "mark it dynamic (torch._dynamo.mark_dynamic) or pad to fixed sizes"
    if "dtype mismatch" in text:
        return "input dtype varies", "cast inputs to one dtype before the call"
    if framework == "tensorflow" and "input signature changed" in text:
        return ("input signature varies",
                "give tf.function an input_signature with None dimensions, or "
                "reduce_retracing=True")
    if framework == "jax":
        return ("input shapes, dtypes or static arguments vary (JAX does not say which; "
                "jax_explain_cache_misses logs it)",
                "pad to fixed shapes, or make the varying argument a traced one")
    if reasons:
        return f"guards failed ({reasons[0][:120]})", "keep what the guard checks constant"
    return "the framework gave no reason", "keep input shapes and types constant"


def verdicts(rows: pd.DataFrame, minimum: int = RECOMPILES) -> list[dict[str, Any]]:
    """One verdict per (process, operation, framework, function) compiled at least
    ``minimum`` times: pid, operation, framework, function, compiles, compile_s, what
    varies, the remedy and a one-line ``text``; most compile time first."""
    out = []
    counted = rows[rows["counts"] == 1]
    keys = ["pid", "session", "process", "operation", "framework", "function"]
    for (pid, session, process, op, fw, fn), g in counted.groupby(keys, sort=False):
        if len(g) < minimum or op == STARTUP:  # eager ops' first compilations: not a loop
            continue
        reasons = [r for r in g["reason"].tolist() if r]
        what, remedy = cause(fw, reasons)
        every = rows[(rows["pid"] == pid) & (rows["session"] == session)
                     & (rows["operation"] == op) & (rows["framework"] == fw)
                     & (rows["function"] == fn)]
        seconds = sum(union_ns(t["begin_ns"].to_numpy(np.int64),
                               t["end_ns"].to_numpy(np.int64))
                      for _, t in every.groupby("thread", sort=False)) / 1e9
        label = FRAMEWORK_NAMES.get(fw, fw)
        text = (f"{op} recompiled {len(g) - 1} times ({len(g)} {label} compilations of "
                f"{fn or '?'}, {seconds:.2f} s): {what}; {remedy}")
        out.append({"pid": int(pid), "session": int(session), "process": process,
                    "operation": op, "framework": fw, "function": fn,
                    "compiles": len(g), "compile_s": seconds, "varies": what,
                    "remedy": remedy, "reasons": reasons[:5], "text": text})
    return sorted(out, key=lambda d: -d["compile_s"])
