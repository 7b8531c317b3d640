"""Actor/learner runs (RLlib's new API stack; a Ray job whose driver reports progress):
per training iteration, what each role did and which part of the driver's iteration took
the time (docs/ray.md#training-iterations).

Input is the lock-step reader's (rlscope.analysis.lockstep.reader.ProcessEvents): the
driver's progress records (RLlib's integration writes one after every ``Algorithm.step``)
end the iterations; its phases ``sampling`` / ``training``, its ``sync_weights`` and
``backprop`` operations and its EnvRunnerGroup rounds (env events of the group, env index
-1: remote ``sample()`` calls out, the driver waiting) split each iteration; each env
runner's ``sample()`` calls (env events with its index) and ``set_state``
(``sync_weights``), each remote learner's ``backprop`` (``Learner.update``) say what the
other roles did in it.

An iteration runs from the previous progress record to its own (the first from the
driver's first phase, round or operation before it), so time the user's loop spends
between ``train()`` calls counts in the next iteration's driver part. The driver's
iteration is cut into parts that do not overlap: *sampling* (the ``sampling`` phase; of
it, *rounds*: remote ``sample()`` calls outstanding), *learner* (the ``training`` phase,
else the driver's ``backprop``), *weight sync* (``sync_weights`` outside both) and the
*driver* (the rest). Synchronous algorithms (PPO) do these one after another, so each
part is on the iteration's critical path for its length; the critical part is the
longest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from rlscope.analysis.intervals import overlap, union
from rlscope.analysis.lockstep.reader import ProcessEvents, env_pairs
from rlscope.analysis.processes import roles
from rlscope.trace import format as fmt

GROUP = "EnvRunnerGroup"  # rlscope.integrations.rllib.GROUP (analysis imports no integration)
SAMPLING, TRAINING = "sampling", "training"
SYNC, BACKPROP = "sync_weights", "backprop"
# The driver's parts, in the order they are cut (an instant in two counts in the first).
PARTS = ("sampling", "learner", "sync", "driver")
PART_ROLE = {"sampling": "env runners", "learner": "learner", "sync": "weight sync",
             "driver": "driver"}

ITERATION_COLUMNS = ["iteration", "begin_s", "wall_s", "sampling_s", "rounds_s",
                     "learner_s", "sync_s", "driver_s", "sample_max_s", "sample_mean_s",
                     "update_max_s", "critical", "critical_share"]
ROLE_COLUMNS = ["iteration", "role", "pid", "name", "sampling_s", "update_s", "sync_s",
                "waiting_s", "wall_s"]
ROLE_DRIVER, ROLE_RUNNER, ROLE_LEARNER = "driver", "env runner", "learner"


@dataclass
class Iterations:
    """Per training iteration, the driver's parts and every role's time."""

    driver_pid: int
    driver: str  # the driver's display name
    algorithm: str  # run metadata ``algorithm`` (RLlib's class name), or ""
    runners: list[tuple[int, str]]  # (pid, name) of the env runners in the iterations
    learners: list[tuple[int, str]]  # remote learners; empty: the driver's local learner
    begin_ns: int  # the first iteration's begin (CLOCK_MONOTONIC of the driver's host)
    table: pd.DataFrame  # one row per iteration (ITERATION_COLUMNS)
    roles: pd.DataFrame  # one row per iteration and process (ROLE_COLUMNS)
    warnings: list[str] = field(default_factory=list)

    def steady(self) -> pd.DataFrame:
        """The iterations the verdict reads: all but the first (warm-up: first samples,
        first update) when there are at least three."""
        t = self.table
        return t.iloc[1:] if len(t) >= 3 else t

    def window_ns(self, steady: bool = True) -> tuple[int, int]:
        """[begin, end) of the (steady) iterations on the driver's clock."""
        t = self.steady() if steady else self.table
        b = self.begin_ns + int(float(t["begin_s"].iloc[0]) * 1e9)
        return b, b + int(float(t["wall_s"].sum()) * 1e9)

    def to_dict(self) -> dict[str, Any]:
        return {"driver_pid": self.driver_pid, "driver": self.driver,
                "algorithm": self.algorithm,
                "runners": [{"pid": p, "name": n} for p, n in self.runners],
                "learners": [{"pid": p, "name": n} for p, n in self.learners],
                "iterations": self.table.to_dict(orient="records"),
                "roles": self.roles.to_dict(orient="records"), "warnings": self.warnings}


def _ids(p: ProcessEvents, names: tuple[str, ...]) -> np.ndarray:
    return p.ids(lambda s: s in names)


def _ops(p: ProcessEvents, *names: str) -> tuple[np.ndarray, np.ndarray]:
    m = np.isin(p.ops.name, _ids(p, names))
    return union(p.ops.begin[m], p.ops.end[m])


def _phases(p: ProcessEvents, *names: str) -> tuple[np.ndarray, np.ndarray]:
    m = np.isin(p.phases.name, _ids(p, names))
    return union(p.phases.begin[m], p.phases.end[m])


def _env(p: ProcessEvents, name: str, vector: bool) -> tuple[np.ndarray, np.ndarray]:
    """The union of ``p``'s env steps named ``name``: the group's rounds (``vector``)
    or a runner's ``sample()`` calls."""
    iv, idx = env_pairs(p.env, False)
    sid = p.strings.index(name) if name in p.strings else -1
    m = (iv.name == sid) & ((idx == fmt.VECTOR_ENV_INDEX) if vector else (idx >= 0))
    return union(iv.begin[m], iv.end[m])


def _minus(b: np.ndarray, e: np.ndarray, b2: np.ndarray, e2: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint sorted [b, e) less the union [b2, e2)."""
    if not len(b2) or not len(b):
        return b, e
    cuts_b, cuts_e = [], []
    for s, t in zip(b.tolist(), e.tolist(), strict=True):
        lo = int(np.searchsorted(e2, s, side="right"))
        for j in range(lo, len(b2)):
            if b2[j] >= t:
                break
            if b2[j] > s:
                cuts_b.append(s)
                cuts_e.append(int(b2[j]))
            s = max(s, int(e2[j]))
            if s >= t:
                break
        if s < t:
            cuts_b.append(s)
            cuts_e.append(t)
    return np.array(cuts_b, np.int64), np.array(cuts_e, np.int64)


def _in(iv: tuple[np.ndarray, np.ndarray], b: int, e: int) -> float:
    return overlap(iv[0], iv[1], np.array([b], np.int64), np.array([e], np.int64)) / 1e9


def _driver(procs: list[ProcessEvents]) -> ProcessEvents | None:
    """The Ray driver that reported progress (a single-process loop with the same phases
    has no roles to scale: not an actor/learner run)."""
    drivers = [p for p in procs if len(p.progress_ns)
               and roles.ray_info(p.metadata).get("kind") == "driver"]
    return max(drivers, key=lambda p: len(p.progress_ns)) if drivers else None


def _runners(procs: list[ProcessEvents], driver: ProcessEvents) -> list[ProcessEvents]:
    """The env runners of the driver's training group (not the evaluation group's)."""
    key = None
    for a in driver.metadata.get(fmt.META_VECENVS) or []:
        if isinstance(a, dict) and a.get("name") == GROUP and isinstance(a.get("key"), dict):
            key = a["key"]
    out = [p for p in procs if p.pid != driver.pid and (
        p.metadata.get(fmt.META_VECENV) == key if key is not None else
        isinstance(p.metadata.get(fmt.META_VECENV), dict)
        and p.metadata[fmt.META_VECENV].get("name") == GROUP)]
    return sorted(out, key=lambda p: (_env_index(p), p.pid))


def _env_index(p: ProcessEvents) -> int:
    i = p.metadata.get(fmt.META_ENV_INDEX)
    return i if isinstance(i, int) else 1 << 30


def _learners(procs: list[ProcessEvents], driver: ProcessEvents,
              runners: list[ProcessEvents]) -> list[ProcessEvents]:
    """Remote learners: other Ray actors with ``backprop`` (Learner.update)."""
    skip = {driver.pid} | {r.pid for r in runners}
    return [p for p in procs if p.pid not in skip and len(_ops(p, BACKPROP)[0])
            and roles.ray_info(p.metadata).get("kind") == "actor"]


def _bounds(driver: ProcessEvents, parts: list[tuple[np.ndarray, np.ndarray]]
            ) -> list[tuple[int, int]]:
    """Each iteration's [begin, end): from the previous progress record to its own; the
    first from the driver's first phase, round or operation before its record."""
    ends = driver.progress_ns.astype(np.int64)
    firsts = [int(b[0]) for b, _ in parts if len(b)]
    first = min(firsts) if firsts else None
    out = []
    for i, e in enumerate(ends.tolist()):
        b = int(ends[i - 1]) if i else first
        if b is None or b >= e:
            continue
        out.append((b, e))
    return out


def analyze(procs: list[ProcessEvents]) -> Iterations | None:
    """The training iterations of the run, or None when no driver reported progress
    with a phase, a round or a weight sync to cut its iterations by."""
    driver = _driver(procs)
    if driver is None:
        return None
    runners = _runners(procs, driver)
    learners = _learners(procs, driver, runners)
    sampling = _phases(driver, SAMPLING)
    rounds = _env(driver, GROUP, vector=True)
    training = _phases(driver, TRAINING)
    learner = training if len(training[0]) else _ops(driver, BACKPROP)
    sync = _ops(driver, SYNC)
    if not any(len(x[0]) for x in (sampling, rounds, learner, sync)):
        return None
    # The driver's parts, cut apart in PARTS order.
    sampling = union(np.r_[sampling[0], rounds[0]], np.r_[sampling[1], rounds[1]])
    learner = _minus(*learner, *sampling)
    taken = union(np.r_[sampling[0], learner[0]], np.r_[sampling[1], learner[1]])
    sync = _minus(*sync, *taken)
    r_sample = [(_env(r, GROUP, vector=False), _ops(r, SYNC)) for r in runners]
    l_update = [_ops(p, BACKPROP) for p in learners]
    rows, role_rows = [], []
    bounds = _bounds(driver, [sampling, learner, sync])
    t0 = bounds[0][0] if bounds else 0
    for i, (b, e) in enumerate(bounds):
        wall = (e - b) / 1e9
        s, rd, lr, sy = (_in(x, b, e) for x in (sampling, rounds, learner, sync))
        drv = max(wall - s - lr - sy, 0.0)
        samples = [_in(x, b, e) for x, _ in r_sample]
        updates = [_in(x, b, e) for x in l_update]
        parts = dict(zip(PARTS, (s, lr, sy, drv), strict=True))
        crit = max(parts, key=lambda k: parts[k])
        rows.append((i + 1, (b - t0) / 1e9, wall, s, rd, lr, sy, drv,
                     max(samples, default=float("nan")),
                     float(np.mean(samples)) if samples else float("nan"),
                     max(updates, default=float("nan")), crit,
                     parts[crit] / wall if wall > 0 else float("nan")))
        waiting = rd + (lr if learners else 0.0)
        role_rows.append((i + 1, ROLE_DRIVER, driver.pid, driver.process, s,
                          0.0 if learners else lr, sy, waiting, wall))
        for r, (_, syn), x in zip(runners, r_sample, samples, strict=True):
            y = _in(syn, b, e)
            role_rows.append((i + 1, ROLE_RUNNER, r.pid, r.process, x, 0.0, y,
                              max(wall - x - y, 0.0), wall))
        for p, u in zip(learners, updates, strict=True):
            role_rows.append((i + 1, ROLE_LEARNER, p.pid, p.process, 0.0, u, 0.0,
                              max(wall - u, 0.0), wall))
    if not rows:
        return None
    warnings = []
    if not runners and len(rounds[0]):
        warnings.append(f"{GROUP} (driver pid {driver.pid}): its env runners' traces are "
                        "missing; the runners' rows are left out")
    algorithm = driver.metadata.get("algorithm")
    return Iterations(driver.pid, driver.process, algorithm if isinstance(algorithm, str) else "",
                      [(r.pid, r.process) for r in runners],
                      [(p.pid, p.process) for p in learners], t0,
                      pd.DataFrame(rows, columns=ITERATION_COLUMNS),
                      pd.DataFrame(role_rows, columns=ROLE_COLUMNS), warnings)


def role_summary(it: Iterations, steady: bool = True) -> pd.DataFrame:
    """Per process (driver, each env runner, each learner): its times summed over the
    (steady) iterations and its shares of their wall time."""
    keep = set(it.steady()["iteration"]) if steady else set(it.table["iteration"])
    r = it.roles[it.roles["iteration"].isin(keep)]
    g = r.groupby(["role", "pid", "name"], sort=False)[
        ["sampling_s", "update_s", "sync_s", "waiting_s", "wall_s"]].sum().reset_index()
    return g
