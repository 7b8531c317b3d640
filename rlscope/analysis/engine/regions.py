"""Elementary intervals of a thread's timeline and the process-wide region partition."""

from __future__ import annotations

import numpy as np

from rlscope.analysis.engine import categories as C
from rlscope.analysis.engine.aggregate import encode
from rlscope.analysis.engine.gpuwork import GpuIndex
from rlscope.analysis.engine.threadstate import ThreadState
from rlscope.trace.gpu import GpuActivities


def runs(start: np.ndarray, dur: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray,
                                                                          np.ndarray]:
    """Maximal runs of consecutive elementary intervals where ``mask`` holds."""
    if not len(mask) or not mask.any():
        z = np.zeros(0, np.int64)
        return z, z
    m = mask.astype(np.int8)
    edges = np.diff(np.r_[np.int8(0), m, np.int8(0)])
    first = np.flatnonzero(edges == 1)
    last = np.flatnonzero(edges == -1) - 1
    return start[first], start[last] + dur[last]


def count_active(starts: np.ndarray, ends: np.ndarray, at: np.ndarray) -> np.ndarray:
    """How many of the [start, end) intervals contain each point (inputs unsorted)."""
    return (np.searchsorted(np.sort(starts), at, side="right")
            - np.searchsorted(np.sort(ends), at, side="right"))


def thread_regions(s: ThreadState, g: GpuActivities, acts: np.ndarray, g_path: np.ndarray,
                    g_phase: np.ndarray, g_cat: np.ndarray, sizes: list[int],
                    index: GpuIndex | None, bottom: int | None, top: int | None):
    """Elementary intervals of one thread from ``bottom`` to ``top`` (None: from the
    start / to the end of its GPU work): (group key, durations with 0 outside the thread's
    covered time, active mask, busy mask, interval starts)."""
    if not len(acts):  # no GPU work: the thread's own events cut its timeline
        b = s.time
        if len(b) < 2:
            z = np.zeros(0, np.int64)
            return z, np.zeros(0), np.zeros(0, bool), np.zeros(0, bool), z
        dur = np.diff(b)
        act = s.active[:-1]
        busy = act & ~s.waiting[:-1] if s.waiting.any() else act
        dur[~act] = 0
        key = encode([s.phase[:-1], s.path[:-1], s.category[:-1]], sizes[:3])
        key *= sizes[3]  # region: CPU only
        return key, dur, act, busy, b[:-1]
    gs, ge = g.start_ns[acts], np.maximum(g.end_ns[acts], g.start_ns[acts])
    lo = bottom if bottom is not None else min(int(gs.min()), int(s.time[0]))
    hi = top if top is not None else max(int(ge.max()), int(s.time[-1]))
    # Merge the three sorted runs (events, GPU starts, GPU ends) with one stable sort;
    # running counts along it give each piece's thread state and running GPU work
    # (equal times only make zero-length pieces, whose order does not matter).
    n, m = len(s.time), len(gs)
    allb = np.concatenate([s.time, np.clip(gs, lo, hi), np.clip(np.sort(ge), lo, hi)])
    order = np.argsort(allb, kind="stable")
    b = allb[order]
    del allb
    tag = np.zeros(n + 2 * m, np.int8)
    tag[n:n + m] = 1
    tag[n + m:] = -1
    tag = tag[order]
    si = np.cumsum(tag == 0, dtype=np.int64)[:-1] - 1  # last event at or before
    gpu_on = np.cumsum(tag, dtype=np.int64)[:-1] > 0
    del tag, order
    start, dur = b[:-1], np.diff(b)
    ok = si >= 0
    np.maximum(si, 0, out=si)
    act = ok & s.active[si]
    del ok
    busy = act & ~s.waiting[si]
    region = np.where(gpu_on, np.where(busy, np.int8(C.CPU_GPU), np.int8(C.GPU_ONLY)),
                      np.int8(C.CPU_ONLY))
    phase, path, cat = s.phase[si], s.path[si], s.category[si]
    del si
    gonly = np.flatnonzero(gpu_on & ~busy & (dur > 0))
    if len(gonly):
        assert index is not None
        choice = index.choose(start[gonly])
        found = choice >= 0
        c = choice[found]
        at = gonly[found]
        phase[at], path[at], cat[at] = g_phase[c], g_path[c], g_cat[c]
    dur[~(act | gpu_on)] = 0
    return encode([phase, path, cat, region], sizes), dur, act, busy, start


def process_regions(act_s, act_e, busy_s, busy_e, g: GpuActivities
                     ) -> tuple[np.ndarray, int]:
    """Process-wide partition: every instant where any thread is active or any GPU work
    runs falls in exactly one region."""
    gs, ge = g.start_ns, np.maximum(g.end_ns, g.start_ns)
    b = np.sort(np.r_[act_s, act_e, busy_s, busy_e, gs, ge])  # repeats: zero-length pieces
    out = np.zeros(C.N_REGIONS, np.int64)
    if len(b) < 2:
        return out, 0
    start, dur = b[:-1], np.diff(b)
    covered = count_active(act_s, act_e, start) > 0
    if len(gs):
        ng = count_active(gs, ge, start)
        covered |= ng > 0
        nb = count_active(busy_s, busy_e, start)
        region = np.where(ng > 0, np.where(nb > 0, C.CPU_GPU, C.GPU_ONLY), C.CPU_ONLY)
    else:
        region = np.zeros(len(start), np.int64)
    out += np.bincount(region[covered], weights=dur[covered],
                       minlength=C.N_REGIONS).astype(np.int64)
    return out, int(out.sum())
