"""The state of one thread after each of its events: innermost operation (as a path id),
phase, CPU category, and whether the thread is active or waiting (off the CPU: blocked on
the GPU or in an intercepted wait call).

A thread's state only changes at its own events, so the CPU timeline of a thread is the
sequence of [t_i, t_{i+1}) segments, each in the state after event i. Everything is
vectorised: nesting depth is a clipped cumulative sum (an end with no begin at depth 0 is
ignored), and the innermost open scope is the latest begin at the current depth.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rlscope.analysis.engine import categories as C
from rlscope.analysis.engine.paths import STARTUP_ID, STARTUP_IMPORTS_ID, NameTable, PathTable
from rlscope.trace import format as fmt

# Pseudo event kinds for CUDA API calls merged into a thread's events.
API_BEGIN = 100
API_END = 101
WAIT_BEGIN = 102  # a synchronising API call (see categories.WAITING_CUDA_CALLS)
WAIT_END = 103


@dataclass
class ThreadState:
    index: int  # ThreadInfo.index (or a pseudo index for CUDA-only threads)
    tid: int
    name: str
    main: bool
    time: np.ndarray  # int64, sorted event times
    # int32 innermost operation path id after each event (0: none; on the main thread
    # before the first user event, the start-up's ids: see Startup)
    path: np.ndarray
    phase: np.ndarray  # int32 phase id after each event (0: none)
    category: np.ndarray  # uint8 CPU category after each event
    active: np.ndarray  # bool: the thread counts as running after the event
    waiting: np.ndarray  # bool: off the CPU: in a synchronising CUDA API call or a wait call
    # Per operation begin (calls) and per call begin (transitions):
    op_begin_path: np.ndarray
    op_begin_phase: np.ndarray
    call_path: dict[int, np.ndarray]  # category -> path id at each call begin
    call_phase: dict[int, np.ndarray]
    phase_times: np.ndarray  # times where the thread's phase changes (for inheritance)
    phase_ids: np.ndarray
    # Named calls (backend, simulator), aggregated here so no per-event array outlives
    # this function: category -> (keys encoding (phase, path, string id) in ``sizes``,
    # ns in that category inside the call, outermost calls).
    call_name: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]
    call_sizes: tuple[int, int, int]
    # State after the last event, to carry into the next batch of events:
    end_calls: list[int]  # kinds of the open backend/simulator/wait calls, in begin order
    end_call_names: list[int]  # the string id to re-open each of end_calls with
    end_api: int  # open CUDA API calls (not waiting)
    end_wait: int  # open synchronising CUDA API calls
    end_phases: list[int]  # open phases (phase ids), outermost first
    end_path: int  # innermost open operation after the last event (0: none)
    # (path ids, time of each one's first begin in these events)
    first_begin: tuple[np.ndarray, np.ndarray]
    op_begin_time: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    def state_at(self, t: np.ndarray) -> np.ndarray:
        """Index of the last event at or before each time (-1 before the first)."""
        return np.searchsorted(self.time, t, side="right") - 1


def _clipped_depth(step: np.ndarray) -> np.ndarray:
    """Nesting depth after each event; an end at depth 0 is ignored (reflected walk)."""
    d = np.cumsum(step, dtype=np.int32)
    return d - np.minimum(np.minimum.accumulate(d), 0)


def _ffill(positions: np.ndarray, values: np.ndarray, n: int, before: object) -> np.ndarray:
    """Array of length n: values[j] from positions[j] until positions[j+1], ``before``
    ahead of the first position. ``positions`` is increasing."""
    lengths = np.diff(np.r_[0, positions, n])
    return np.repeat(np.r_[np.array([before], dtype=values.dtype), values], lengths)


def _active_flags(kind: np.ndarray, begin: int, end: int
                  ) -> tuple[np.ndarray, np.ndarray, int]:
    """(inside a call after each event, positions of the begins, depth at the end)."""
    idx = np.flatnonzero((kind == begin) | (kind == end))
    n = len(kind)
    if not len(idx):
        return np.zeros(n, bool), idx, 0
    is_b = kind[idx] == begin
    depth = _clipped_depth(np.where(is_b, 1, -1).astype(np.int8))
    return _ffill(idx, depth > 0, n, False), idx[is_b], int(depth[-1])


def _outer_names(on: np.ndarray, names: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where the outermost open call's name changes: (event positions, the string id from
    each on, 0 outside every call), and the positions of the begins that open an
    outermost call. ``on``: inside a call of the kind after each event (_active_flags);
    the name changes only where it turns on (an outermost call opens) or off (the last
    open one closes), so no per-call-event array is made (the sweep is near its peak
    memory here)."""
    if not len(on):
        return np.zeros(0, np.int64), np.zeros(0, np.uint32), np.zeros(0, np.int64)
    edges = np.flatnonzero(on[1:] != on[:-1]) + 1
    if on[0]:
        edges = np.r_[0, edges]
    opens = on[edges]
    return edges, np.where(opens, names[edges], 0).astype(np.uint32), edges[opens]


_BLOCK = 1 << 16  # events per block of the named-call sums (bounds their temporaries)


def _named_totals(time: np.ndarray, phase: np.ndarray, path: np.ndarray,
                  category: np.ndarray, active: np.ndarray, cat: int,
                  edge_pos: np.ndarray, edge_val: np.ndarray, outer: np.ndarray,
                  sizes: tuple[int, int, int]
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per (phase, path, call name) key: ns of the thread's segments in category ``cat``
    inside the call, and the outermost call begins at ``outer``; the name after an event
    is the value of the last edge at or before it. In blocks of events."""
    _, pa_s, nm_s = sizes

    def name_at(i: np.ndarray) -> np.ndarray:
        j = np.searchsorted(edge_pos, i, side="right") - 1
        return np.where(j >= 0, edge_val[np.maximum(j, 0)], 0)

    def key(i: np.ndarray, nm: np.ndarray) -> np.ndarray:
        return (phase[i].astype(np.int64) * pa_s + path[i]) * nm_s + nm

    sums: dict[int, list[float]] = {}

    def add(k: np.ndarray, ns: np.ndarray, n: np.ndarray) -> None:
        uniq, inv = np.unique(k, return_inverse=True)
        s_ns = np.bincount(inv, ns, minlength=len(uniq))
        s_n = np.bincount(inv, n, minlength=len(uniq))
        for u, a, c in zip(uniq.tolist(), s_ns.tolist(), s_n.tolist(), strict=True):
            e = sums.setdefault(u, [0.0, 0.0])
            e[0] += a
            e[1] += c

    last = len(time) - 1
    for lo in range(0, last, _BLOCK):
        hi = min(lo + _BLOCK, last)
        on = lo + np.flatnonzero((category[lo:hi] == cat) & active[lo:hi])
        nm = name_at(on)
        on, nm = on[nm > 0], nm[nm > 0]
        if len(on):
            add(key(on, nm), (time[on + 1] - time[on]).astype(np.float64),
                np.zeros(len(on)))
    for lo in range(0, len(outer), _BLOCK):
        o = outer[lo:lo + _BLOCK]
        add(key(o, name_at(o)), np.zeros(len(o)), np.ones(len(o)))
    keys = np.fromiter(sums, np.int64, len(sums))
    vals = np.array(list(sums.values()), np.float64).reshape(-1, 2)
    return keys, vals[:, 0], vals[:, 1].astype(np.int64)


def innermost_ops(kind: np.ndarray, name: np.ndarray, strings: list[str],
                  paths: PathTable, begin: int = fmt.OPERATION_BEGIN,
                  end: int = fmt.OPERATION_END,
                  firsts: list[tuple[np.ndarray, np.ndarray]] | None = None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(path id after each event, path id of each begin event in order). With
    ``firsts``, appends (path ids, event index of each one's first begin) per level."""
    n = len(kind)
    idx = np.flatnonzero((kind == begin) | (kind == end))
    m = len(idx)
    if not m:
        return np.zeros(n, np.int32), np.zeros(0, np.int32)
    is_b = kind[idx] == begin
    lvl = _clipped_depth(np.where(is_b, 1, -1).astype(np.int8))
    # Latest begin at the current level: sort by level (stable), forward-fill within it.
    order = np.argsort(lvl.astype(np.int16), kind="stable")
    lvl_s = lvl[order].astype(np.int64)
    base = lvl_s * (m + 1)
    acc = np.maximum.accumulate(np.where(is_b[order], base + order + 1, base))
    inner = np.empty(m, np.int64)
    inner[order] = acc - base - 1  # -1: level 0 (outside every operation)
    inner[lvl == 0] = -1
    # Path id of each begin, level by level: parent = innermost after the previous event.
    path_of = np.zeros(m, np.int32)
    prev_inner = np.r_[-1, inner[:-1]]
    names = name[idx]
    for level in range(1, int(lvl.max()) + 1):
        sel = np.flatnonzero(is_b & (lvl == level))
        if not len(sel):
            continue
        parent_pos = prev_inner[sel]
        parent = np.where(parent_pos >= 0, path_of[np.maximum(parent_pos, 0)], 0)
        level_firsts: list[tuple[np.ndarray, np.ndarray]] | None = \
            [] if firsts is not None else None
        path_of[sel] = paths.intern_many(parent, names[sel], strings, level_firsts)
        if firsts is not None and level_firsts:
            ids, first = level_firsts[0]
            firsts.append((ids, idx[sel[first]]))
    after = np.where(inner >= 0, path_of[np.maximum(inner, 0)], 0).astype(np.int32)
    return _ffill(idx, after, n, np.int32(0)), path_of[is_b]


def phase_changes(time: np.ndarray, kind: np.ndarray, name: np.ndarray, strings: list[str],
                  phases: NameTable
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[int]]:
    """(positions, times, phase ids) where the innermost phase changes, and the phases
    open at the end. Phases are rare, so a plain stack will do."""
    idx = np.flatnonzero((kind == fmt.PHASE_BEGIN) | (kind == fmt.PHASE_END))
    stack: list[int] = []
    ids = []
    for k, nm in zip(kind[idx].tolist(), name[idx].tolist(), strict=True):
        if k == fmt.PHASE_BEGIN:
            stack.append(phases.intern(strings[nm]))
        elif stack:
            stack.pop()
        ids.append(stack[-1] if stack else 0)
    return idx, time[idx], np.array(ids, np.int32), stack


@dataclass
class Startup:
    """The main thread's start-up: before ``end_ns`` (the first user event), time outside
    every operation is the start-up's, inside the import runs [begin, end) its imports'.
    The thread's events must have boundaries at ``end_ns`` and at every run's ends."""

    end_ns: int
    import_begin: np.ndarray
    import_end: np.ndarray


def _mark_startup(time: np.ndarray, path: np.ndarray, startup: Startup) -> None:
    k = int(np.searchsorted(time, startup.end_ns, side="left"))
    if not k:
        return
    pre = np.flatnonzero(path[:k] == 0)
    if not len(pre):
        return
    ids = np.full(len(pre), STARTUP_ID, np.int32)
    ib, ie = startup.import_begin, startup.import_end
    if len(ib):
        t = time[pre]
        j = np.searchsorted(ib, t, side="right") - 1
        ids[(j >= 0) & (t < ie[np.maximum(j, 0)])] = STARTUP_IMPORTS_ID
    path[pre] = ids


def thread_state(index: int, tid: int, name: str, main: bool, time: np.ndarray,
                 kind: np.ndarray, names: np.ndarray, strings: list[str], paths: PathTable,
                 phases: NameTable, span: tuple[int, int],
                 inherited_phase: tuple[np.ndarray, np.ndarray] | None,
                 n_synthetic: int = 0, startup: Startup | None = None) -> ThreadState:
    """State after each event of one thread; events must be sorted by time (stably).

    The first ``n_synthetic`` events only re-open the scopes carried over from the previous
    batch: they set the state but count as no calls. ``startup`` (main thread only) marks
    its start-up in ``path``.
    """
    n = len(time)
    firsts: list[tuple[np.ndarray, np.ndarray]] = []
    path, op_begin_path = innermost_ops(kind, names, strings, paths, firsts=firsts)
    end_path = int(path[-1]) if n else 0
    if startup is not None and n:
        _mark_startup(time, path, startup)
    ph_pos, ph_times, ph_ids, ph_stack = phase_changes(time, kind, names, strings, phases)
    if len(ph_pos) or inherited_phase is None or not len(inherited_phase[0]):
        phase = _ffill(ph_pos, ph_ids, n, np.int32(0))
    else:  # no phases of its own: the main thread's phase at the same time
        it, iid = inherited_phase
        j = np.searchsorted(it, time, side="right") - 1
        phase = np.where(j >= 0, iid[np.maximum(j, 0)], 0).astype(np.int32)

    bk_on, bk_begins, bk_end = _active_flags(kind, fmt.BACKEND_CALL_BEGIN,
                                             fmt.BACKEND_CALL_END)
    sim_on, sim_begins, sim_end = _active_flags(kind, fmt.SIMULATOR_CALL_BEGIN,
                                                fmt.SIMULATOR_CALL_END)
    wc_on, wc_begins, wc_end = _active_flags(kind, fmt.WAIT_CALL_BEGIN, fmt.WAIT_CALL_END)
    api_on, _, api_end = _active_flags(np.where(kind == WAIT_BEGIN, API_BEGIN,
                                       np.where(kind == WAIT_END, API_END, kind))
                              if len(kind) and kind.max() >= API_BEGIN else kind,
                              API_BEGIN, API_END)
    wait_on, _, wait_end = _active_flags(kind, WAIT_BEGIN, WAIT_END)
    calls = ((C.BACKEND, bk_on, bk_begins, bk_end, fmt.BACKEND_CALL_BEGIN),
             (C.SIMULATOR, sim_on, sim_begins, sim_end, fmt.SIMULATOR_CALL_BEGIN),
             (C.WAITING, wc_on, wc_begins, wc_end, fmt.WAIT_CALL_BEGIN))
    category = np.zeros(n, np.uint8)
    present = [(cat, on, begins) for cat, on, begins, _, _ in calls if len(begins)]
    for cat, on, _ in present:
        category[on] = cat
    if len(present) > 1:  # calls of several categories open at once: the later-started wins
        several = np.flatnonzero(np.sum([on for _, on, _ in present], axis=0, dtype=np.uint8)
                                 > 1)
        latest = np.full(len(several), -1, np.int64)  # latest open call's begin position
        for cat, on, begins in present:
            last = np.searchsorted(begins, several, side="right") - 1
            lb = np.where(on[several] & (last >= 0), begins[np.maximum(last, 0)], -1)
            category[several[lb > latest]] = cat
            np.maximum(latest, lb, out=latest)
    category[api_on] = C.CUDA_API

    if main:
        active = (time >= span[0]) & (time < span[1])
    else:  # a wait alone does not make a thread active: an idle worker adds nothing
        active = ((path > 0) | bk_on | sim_on | api_on) & (time < span[1])
    # Inside an aggregated stretch (a bounded trace's gap) the aggregates hold the time.
    gap_on, gap_begins, gap_end = _active_flags(kind, fmt.AGGREGATED_BEGIN,
                                                fmt.AGGREGATED_END)
    if len(gap_begins) or gap_end:
        active &= ~gap_on
    api_begins = np.flatnonzero((kind == API_BEGIN) | (kind == WAIT_BEGIN))
    op_b = np.flatnonzero(kind == fmt.OPERATION_BEGIN)
    real = op_b >= n_synthetic
    call_pos = {C.BACKEND: bk_begins, C.SIMULATOR: sim_begins, C.WAITING: wc_begins,
                C.CUDA_API: api_begins}
    call_pos = {c: p[p >= n_synthetic] for c, p in call_pos.items()}
    open_calls = sorted((int(b[-1]), k, e) for _, _, b, e, k in
                        (*calls, (0, gap_on, gap_begins, gap_end, fmt.AGGREGATED_BEGIN))
                        if e)
    end_calls = [k for _, k, e in open_calls for _ in range(e)]
    call_name: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    outer_end: dict[int, int] = {}
    sizes = (len(phases.names), len(paths), len(strings))
    for cat, on, begin in ((C.BACKEND, bk_on, fmt.BACKEND_CALL_BEGIN),
                           (C.SIMULATOR, sim_on, fmt.SIMULATOR_CALL_BEGIN)):
        if cat in (c for c, _, b, _, _ in calls if len(b)):
            edge_pos, edge_val, outer = _outer_names(on, names)
            outer_end[begin] = int(edge_val[-1]) if len(edge_val) else 0
            call_name[cat] = _named_totals(time, phase, path, category, active, cat,
                                           edge_pos, edge_val, outer[outer >= n_synthetic],
                                           sizes)
    # Re-opened calls keep their name: the outermost of each kind carries it.
    end_call_names, seen = [], set()
    for k in end_calls:
        end_call_names.append(outer_end.get(k, 0) if k not in seen else 0)
        seen.add(k)
    return ThreadState(
        index, tid, name, main, time, path, phase, category, active, wait_on | wc_on,
        op_begin_path[real], phase[op_b[real]],
        {c: path[p] for c, p in call_pos.items()}, {c: phase[p] for c, p in call_pos.items()},
        ph_times, ph_ids, call_name, sizes, end_calls, end_call_names, api_end - wait_end,
        wait_end, ph_stack, end_path,
        _first_times(firsts, time), op_begin_time=time[op_b[real]])


def _first_times(firsts: list[tuple[np.ndarray, np.ndarray]], time: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    if not firsts:
        return np.zeros(0, np.int32), np.zeros(0, np.int64)
    return (np.concatenate([f[0] for f in firsts]),
            np.concatenate([time[f[1]] for f in firsts]))
