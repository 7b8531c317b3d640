"""Per-event cost by kind from whole runs in several configurations.

Model, per round r and configuration c (every configuration runs once per round, in a
rotated order, so slow drift of the machine hits all of them alike):

    T[r, c] / T[r, uninstrumented] - 1  =  sum_k n[r, c, k] * cost_k / T_u

where n are the event counts read from that run's own trace and T_u the median
uninstrumented time. Ratios (not differences) cancel a round that ran slower as a whole.
Each round is solved by least squares. The cost is that median with one round, and with
two or more a least-squares fit on each configuration's fastest run (other load only
slows runs down; see :func:`_fit_fastest`). Its error bar is the standard error of the
median of the per-round estimates (their sample deviation bounds it from below with
fewer than eight rounds), and never less than the distance between that fit and the
median. Held-out rounds validate: the
full run's time minus its estimated overhead is compared with the same round's measured
uninstrumented time.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from rlscope.analysis.overhead.kinds import KINDS, MICROBENCHMARK_ONLY

UNINSTRUMENTED = "uninstrumented"


@dataclass
class RunSample:
    """One run: its configuration, round, time (CPU seconds of the process tree in
    rls-prof's calibration) and event counts by kind."""

    config: str
    round: int
    seconds: float
    counts: dict[str, int] = field(default_factory=dict)
    wall_s: float = math.nan
    boundaries: int = 0  # chunks: the progress reports the chunk spans


@dataclass
class CostEstimate:
    per_event_ns: float
    error_ns: float  # standard error of the median over rounds (nan with one round)
    rounds: list[float]  # the per-round estimates, ns
    confounded_with: list[str] = field(default_factory=list)  # not separable by the runs


@dataclass
class Validation:
    rounds: list[int]
    errors_pct: list[float]  # (T_full - overhead) / T_uninstrumented - 1, per round
    independent: bool  # False when the same rounds calibrated and validated
    corrected_s: float = math.nan  # sums over the rounds
    uninstrumented_s: float = math.nan
    dropped: list[int] = field(default_factory=list)  # outlier rounds left out

    @property
    def total_error_pct(self) -> float:
        """Error of the summed corrected time over the summed uninstrumented time."""
        if not self.uninstrumented_s > 0:
            return math.nan
        return 100.0 * (self.corrected_s / self.uninstrumented_s - 1.0)

    @property
    def median_pct(self) -> float:
        return float(np.median(self.errors_pct)) if self.errors_pct else math.nan

    @property
    def max_abs_pct(self) -> float:
        return float(np.max(np.abs(self.errors_pct))) if self.errors_pct else math.nan


def split_rounds(rounds: list[int]) -> tuple[list[int], list[int]]:
    """Alternate rounds: even positions calibrate, odd ones validate (interleaved halves
    see the same drift). With one round it does both."""
    rs = sorted(set(rounds))
    if len(rs) < 2:
        return rs, rs
    return rs[0::2], rs[1::2]


def _by_round(samples: list[RunSample]) -> dict[int, dict[str, RunSample]]:
    out: dict[int, dict[str, RunSample]] = {}
    for s in samples:
        out.setdefault(s.round, {})[s.config] = s
    return out


def uninstrumented_seconds(samples: list[RunSample]) -> np.ndarray:
    return np.array([s.seconds for s in samples if s.config == UNINSTRUMENTED])


def _observed_kinds(samples: list[RunSample]) -> list[str]:
    """Kinds to fit: those with events, less the ones whole runs cannot separate (their
    cost, when known, is taken off the times first; see :func:`estimate_costs`)."""
    return [k for k in KINDS if k not in MICROBENCHMARK_ONLY
            and any(s.counts.get(k, 0) for s in samples)]


def _known_ns(s: RunSample, known: dict[str, float]) -> float:
    return overhead_ns({k: s.counts.get(k, 0) for k in known}, known)


# Two kinds whose count columns (each scaled to unit length) span less than this (the
# smaller singular value over the larger) are taken as proportional: counts that moved
# together in every run but for a few events at chunk edges (65 annotations and 64
# simulator calls in each copy) solve to any split of their sum (seen: +25 ms and
# -25 ms per event).
COLLINEAR = 0.02


def _confounded(x: np.ndarray, kinds: list[str]) -> dict[str, list[str]]:
    """Kinds whose count columns are (nearly) proportional across configurations."""
    out: dict[str, list[str]] = {k: [] for k in kinds}
    norm = np.linalg.norm(x, axis=0)
    for i, a in enumerate(kinds):
        for j, b in enumerate(kinds):
            if i == j or not (norm[i] > 0 and norm[j] > 0):
                continue
            sv = np.linalg.svd(x[:, [i, j]] / norm[[i, j]], compute_uv=False)
            if len(sv) < 2 or sv[-1] < COLLINEAR * sv[0]:  # (one run: rank 1)
                out[a].append(b)
    return out


def estimate_costs(samples: list[RunSample], rounds: list[int] | None = None,
                   paired: bool = False, known: dict[str, float] | None = None
                   ) -> dict[str, CostEstimate]:
    """Per-event cost (ns) by kind, from the given rounds (default: all).

    ``paired``: the rounds are chunks of different work, each measured in every
    configuration moments apart (inprocess.chunk_copies); the cost is then the median of
    the per-chunk estimates (a fastest run over different work means nothing).
    ``known``: per-event costs (ns) of kinds not fitted (kinds.MICROBENCHMARK_ONLY),
    taken off each run's time before the fit; without them those kinds' cost is absorbed
    by the kinds recorded alongside."""
    known = dict(known or {})
    if known:
        samples = [dataclasses.replace(s, seconds=s.seconds - _known_ns(s, known) / 1e9)
                   for s in samples]
    t_u = float(np.median(uninstrumented_seconds(samples)))
    kinds = _observed_kinds(samples)
    if paired:
        return _estimate_pooled(samples, rounds, kinds)
    per_round: dict[str, list[float]] = {k: [] for k in kinds}
    confounded: dict[str, list[str]] = {k: [] for k in kinds}
    for r, runs in sorted(_by_round(samples).items()):
        if (rounds is not None and r not in rounds) or UNINSTRUMENTED not in runs:
            continue
        base = runs[UNINSTRUMENTED].seconds
        inst = [s for c, s in sorted(runs.items()) if c != UNINSTRUMENTED]
        if not inst or base <= 0:
            continue
        x = np.array([[s.counts.get(k, 0) for k in kinds] for s in inst], np.float64)
        # Whole runs: ratios to the round's own uninstrumented run, scaled to the median
        # one (cancels a round that ran slower as a whole). Chunks: plain differences.
        y = np.array([(s.seconds - base if paired else (s.seconds / base - 1.0) * t_u) * 1e9
                      for s in inst])
        # Scale columns so the tiny per-process count and millions of calls solve alike.
        scale = np.maximum(x.max(axis=0), 1.0)
        cost = np.linalg.lstsq(x / scale, y, rcond=None)[0] / scale
        for k, c in zip(kinds, cost, strict=True):
            per_round[k].append(float(c))
        for k, others in _confounded(x, kinds).items():
            confounded[k] = sorted(set(confounded[k]) | set(others))
    point = {} if paired else _fit_fastest(samples, rounds, kinds, t_u)
    out = {}
    for k in kinds:
        v = np.array(per_round[k])
        if not len(v):
            continue
        med = float(np.median(v))
        value = point.get(k, med) if point else med
        # The bar describes the value reported: the rounds' spread, and at least how far
        # the fastest-run fit lies from the rounds' median (two estimates of one cost).
        err = max(_median_error(v), abs(value - med)) if len(v) > 1 else _median_error(v)
        out[k] = CostEstimate(value, err, v.tolist(), confounded[k])
    return out


def _paired_rows(samples: list[RunSample], rounds: list[int] | None, kinds: list[str]
                 ) -> list[tuple[int, np.ndarray, np.ndarray, np.ndarray]]:
    """Per round: (round, counts of each instrumented run, its excess ns over the same
    round's uninstrumented run, that uninstrumented time in ns)."""
    out = []
    for r, runs in sorted(_by_round(samples).items()):
        if (rounds is not None and r not in rounds) or UNINSTRUMENTED not in runs:
            continue
        base = runs[UNINSTRUMENTED].seconds
        inst = [s for c, s in sorted(runs.items()) if c != UNINSTRUMENTED]
        if inst:
            x = np.array([[s.counts.get(k, 0) for k in kinds] for s in inst], np.float64)
            out.append((r, x, np.array([(s.seconds - base) * 1e9 for s in inst]),
                        np.full(len(inst), base * 1e9)))
    return out


def _lstsq(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    # Scale columns so the tiny per-process count and millions of calls solve alike.
    scale = np.maximum(x.max(axis=0), 1.0)
    return np.linalg.lstsq(x / scale, y, rcond=None)[0] / scale


def _robust_lstsq(x: np.ndarray, y: np.ndarray, size: np.ndarray) -> np.ndarray:
    """Least squares with Huber weights on residuals relative to the chunk's size: a
    chunk disturbed far more than the others (it happens) does not set the costs."""
    cost = _lstsq(x, y)
    for _ in range(10):
        rel = (y - x @ cost) / np.maximum(size, 1.0)
        mad = 1.4826 * float(np.median(np.abs(rel - np.median(rel))))
        if not mad > 0:
            break
        w = np.sqrt(np.minimum(1.0, 1.345 * mad / np.maximum(np.abs(rel), 1e-300)))
        cost = _lstsq(x * w[:, None], y * w)
    return cost


def _estimate_pooled(samples: list[RunSample], rounds: list[int] | None, kinds: list[str]
                     ) -> dict[str, CostEstimate]:
    """Paired chunks: one (robust) least-squares fit over every chunk's excess times (long
    chunks weigh more, as they should); error bars by jackknife over chunks."""
    rows = _paired_rows(samples, rounds, kinds)
    if not rows or not kinds:
        return {}
    def fit(sel: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]]) -> np.ndarray:
        return _robust_lstsq(np.vstack([r[1] for r in sel]),
                             np.concatenate([r[2] for r in sel]),
                             np.concatenate([r[3] for r in sel]))

    x = np.vstack([r[1] for r in rows])
    cost = fit(rows)
    loo = np.array([fit(rows[:i] + rows[i + 1:]) for i in range(len(rows))]) \
        if len(rows) > 2 else np.empty((0, len(kinds)))
    n = len(loo)
    err = np.sqrt((n - 1) / n * ((loo - loo.mean(axis=0)) ** 2).sum(axis=0)) if n else \
        np.full(len(kinds), math.nan)
    conf = _confounded(x, kinds)
    return {k: CostEstimate(float(cost[i]), float(err[i]),
                            loo[:, i].tolist() if n else [], conf[k])
            for i, k in enumerate(kinds)}


def _fit_fastest(samples: list[RunSample], rounds: list[int] | None, kinds: list[str],
                 t_u: float) -> dict[str, float]:
    """One least-squares fit on each configuration's fastest run over the rounds.

    Other load on the machine only ever makes a run slower, so with three or more rounds
    the fastest run of each configuration is the best estimate of its undisturbed time
    (a median of paired ratios is spoilt when either run of a pair was disturbed)."""
    sel = [s for s in samples if rounds is None or s.round in rounds]
    if len({s.round for s in sel}) < 2:
        return {}
    fastest: dict[str, RunSample] = {}
    for s in sel:
        if s.config not in fastest or s.seconds < fastest[s.config].seconds:
            fastest[s.config] = s
    base = fastest.get(UNINSTRUMENTED)
    inst = [s for c, s in sorted(fastest.items()) if c != UNINSTRUMENTED]
    if base is None or not inst:
        return {}
    x = np.array([[s.counts.get(k, 0) for k in kinds] for s in inst], np.float64)
    y = np.array([(s.seconds - base.seconds) * 1e9 for s in inst])
    scale = np.maximum(x.max(axis=0), 1.0)
    cost = np.linalg.lstsq(x / scale, y, rcond=None)[0] / scale
    return {k: float(c) for k, c in zip(kinds, cost, strict=True)}


def _median_error(v: np.ndarray) -> float:
    if len(v) < 2:
        return math.nan
    if len(v) == 2:
        return float(abs(v[0] - v[1]) / 2)
    mad = float(np.median(np.abs(v - np.median(v)))) * 1.4826
    # The MAD of a handful of rounds can be near zero by chance (seen: a 58 ns bar on an
    # estimate 550 ns off); below eight rounds the sample deviation bounds it from below.
    sd = max(mad, float(np.std(v, ddof=1))) if len(v) < 8 or mad == 0 else mad
    return 1.2533 * sd / math.sqrt(len(v))


def overhead_ns(counts: dict[str, int], costs: dict[str, float]) -> float:
    return float(sum(n * costs.get(k, 0.0) for k, n in counts.items()))


def validate(samples: list[RunSample], costs: dict[str, float], rounds: list[int],
             config: str, independent: bool, drop_outliers: bool = False) -> Validation:
    """Corrected time of ``config`` vs the same round's uninstrumented time.

    ``drop_outliers`` (paired chunks): leave out rounds whose raw excess of ``config``
    over the uninstrumented copy is far from the others' (:func:`outlier_rounds`): one
    copy disturbed by the machine is a failed measurement, not an error of the
    correction. The rounds left out are in ``Validation.dropped``."""
    pairs = {r: (runs[config], runs[UNINSTRUMENTED])
             for r, runs in sorted(_by_round(samples).items())
             if r in rounds and UNINSTRUMENTED in runs and config in runs}
    dropped = outlier_rounds({r: s.seconds / u.seconds - 1.0 for r, (s, u) in pairs.items()
                              if u.seconds > 0}) if drop_outliers else []
    used, errs, tot_c, tot_u = [], [], 0.0, 0.0
    for r, (s, u) in pairs.items():
        if r in dropped:
            continue
        corrected = s.seconds - overhead_ns(s.counts, costs) / 1e9
        used.append(r)
        errs.append(100.0 * (corrected / u.seconds - 1.0))
        tot_c += corrected
        tot_u += u.seconds
    return Validation(used, errs, independent, tot_c, tot_u, dropped)


OUTLIER_MADS = 4.0
OUTLIER_MIN = 0.03  # never call a round an outlier for less than 3% off the median


def outlier_rounds(excess: dict[int, float]) -> list[int]:
    """Rounds whose excess (instrumented / uninstrumented - 1) is more than 4 MADs and 3
    points from the median excess; at most a quarter of the rounds."""
    if len(excess) < 4:
        return []
    v = np.array(list(excess.values()))
    med = float(np.median(v))
    mad = 1.4826 * float(np.median(np.abs(v - med)))
    limit = max(OUTLIER_MADS * mad, OUTLIER_MIN)
    far = sorted((abs(x - med), r) for r, x in excess.items() if abs(x - med) > limit)
    return sorted(r for _d, r in far[::-1][:len(v) // 4])
