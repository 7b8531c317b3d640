"""Interval arithmetic on sorted numpy arrays of [begin, end) nanoseconds: the one place
every analysis takes unions, overlaps and coverage from. ``Intervals`` carries the thread
and name (string id) of each interval where callers need them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Intervals:
    """Begin and end times (ns) of intervals, with the thread and name (string id) of
    each."""

    begin: np.ndarray
    end: np.ndarray
    thread: np.ndarray
    name: np.ndarray  # string ids

    def __len__(self) -> int:
        return len(self.begin)

    @staticmethod
    def empty() -> Intervals:
        z = np.zeros(0, np.int64)
        return Intervals(z, z, z, z)


def union(begin: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals [begin, end) as sorted disjoint intervals (int64); an end
    before its begin counts as the begin; touching intervals stay apart."""
    if not len(begin):
        z = np.zeros(0, np.int64)
        return z, z
    o = np.argsort(begin, kind="stable")
    b = np.asarray(begin)[o].astype(np.int64)
    e = np.maximum(np.asarray(end)[o], b).astype(np.int64)
    reach = np.maximum.accumulate(e)
    first = np.flatnonzero(np.r_[True, b[1:] > reach[:-1]])  # after all before it ended
    last = np.r_[first[1:], len(b)] - 1
    return b[first], reach[last]


def length(begin: np.ndarray, end: np.ndarray) -> int:
    """Total length (ns) of disjoint intervals."""
    return int((np.asarray(end) - np.asarray(begin)).sum())


def overlap(b: np.ndarray, e: np.ndarray, b2: np.ndarray, e2: np.ndarray) -> int:
    """Total overlap (ns) of two sets of disjoint sorted intervals."""
    if not len(b) or not len(b2):
        return 0
    total = 0
    lo = np.searchsorted(e2, b, side="right")
    hi = np.searchsorted(b2, e, side="left")
    for i in np.flatnonzero(hi > lo).tolist():
        s = slice(lo[i], hi[i])
        total += int(np.maximum(0, np.minimum(e2[s], e[i]) - np.maximum(b2[s], b[i])).sum())
    return total


def covered_before(s: np.ndarray, e: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Time covered by the disjoint sorted intervals (s, e) before each time ``t``."""
    if not len(s):
        return np.zeros(len(t))
    cum = np.r_[0, np.cumsum(e - s)]
    i = np.searchsorted(s, t, side="right") - 1
    ok = i >= 0
    j = np.maximum(i, 0)
    inside = np.clip(np.minimum(t, e[j]) - s[j], 0, None)
    return np.where(ok, cum[j] + inside, 0).astype(np.float64)


def overlaps_any(start: np.ndarray, end: np.ndarray, u_start: np.ndarray,
                 u_end: np.ndarray) -> np.ndarray:
    """Whether each interval overlaps one of the disjoint sorted intervals u."""
    if not len(u_start):
        return np.zeros(len(start), bool)
    j = np.searchsorted(u_start, end, side="left") - 1
    return (j >= 0) & (u_end[np.maximum(j, 0)] > start)


def contains_any(s: np.ndarray, e: np.ndarray, a_s: np.ndarray, a_e: np.ndarray
                 ) -> np.ndarray:
    """Whether each interval contains one of the disjoint sorted intervals a."""
    if not len(a_s):
        return np.zeros(len(s), bool)
    j = np.searchsorted(a_s, s, side="left")
    return (j < len(a_s)) & (a_e[np.minimum(j, len(a_s) - 1)] <= e)


def inside_any(s: np.ndarray, e: np.ndarray, u_s: np.ndarray, u_e: np.ndarray
               ) -> np.ndarray:
    """Whether each interval lies inside one of the disjoint sorted intervals u."""
    if not len(u_s):
        return np.zeros(len(s), bool)
    j = np.searchsorted(u_s, s, side="right") - 1
    k = np.maximum(j, 0)
    return (j >= 0) & (u_e[k] >= e)
