"""rls-prof's side of paired-chunk calibration: run the workload once with the chunk
driver (:mod:`rlscope.inprocess.chunk_copies`) and turn its children's times and traces
into samples, one round per chunk."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from rlscope.analysis.overhead.kinds import PROCESS, RLSCOPE_IMPORT, count_events
from rlscope.calibration.configs import Config
from rlscope.calibration.estimate import UNINSTRUMENTED, RunSample
from rlscope.calibration.runner import (
    SUBDIR,
    RunRecord,
    Status,
    config_recording,
    run_once,
)
from rlscope.errors import RLScopeError
from rlscope.inprocess import chunk_copies as ch
from rlscope.intercept import BACKENDS, SIMULATORS, WAITS
from rlscope.launch import child_env
from rlscope.launch.child_env import Recording
from rlscope.trace.reader import read_trace

CHUNKS_SUBDIR = "chunks"
MIN_CHUNKS = ch.MIN_CHUNKS  # fewer: rls-prof falls back to the checked cost model


def chunk_configs(configs: list[Config]) -> list[ch.ChunkConfig]:
    """The whole-run configurations as in-process switches: the call mask of the
    categories each one intercepts, a backend's with its phase markers (``base`` has no
    in-process equivalent: its annotations-off switch is made at start-up).

    A bit switches a category for every library of it, so a configuration gets one only
    if it intercepts every library of that category the run does: the annotating
    integrations include EnvPool and PufferLib, whose native calls are Simulator calls,
    and with the bit for them the annotations copy recorded MuJoCo's calls too, so the
    simulator's count followed the annotations' in every copy and the chunks could not
    tell their costs apart (seen: +25 ms and -25 ms per event, once left uncaught)."""
    every = set().union(*(c.intercept for c in configs))

    def bit(group: tuple[str, ...], value: int, c: Config) -> int:
        libs = every.intersection(group)
        return value if libs and libs.issubset(c.intercept) else 0

    out = []
    for c in configs:
        if c.name == "base" or c.cuda:
            continue
        # The phase markers (8) come with the backends' wrappers, as in a profiled run.
        mask = bit(BACKENDS, 1 | 8, c) | bit(SIMULATORS, 2, c) | bit(WAITS, 4, c)
        out.append(ch.ChunkConfig(c.name, c.record, mask))
    return out


def chunk_under_way(root: Path) -> int:
    """The chunk the calibration copies are measuring (1, 2, ...; 0: none yet), from the
    names of their trace directories and result files, ``<chunk>-<config>``."""
    latest = -1
    try:
        with os.scandir(root) as entries:
            for e in entries:
                head, dash, _ = e.name.partition("-")
                if dash and head.isdigit():
                    latest = max(latest, int(head))
    except OSError:
        pass
    return latest + 1


def run_chunks(command: list[str], configs: list[Config], out: Path, rec: Recording,
               chunk_s: float, max_chunks: int, budget_s: float | None = None,
               echo: Callable[[str], None] | None = None,
               status: Status | None = None) -> tuple[list[RunRecord], str]:
    """(samples of the complete chunks, why the chunk driver stopped). ``echo``: the
    outcome, a line; ``status``: which chunk is being measured, while it runs."""
    root = out / SUBDIR / CHUNKS_SUBDIR
    full = next(c for c in configs if c.name == "full")
    # Every interception installed, no CUDA (it does not survive fork), no work bound.
    full_rec = config_recording(rec, Config("full", intercept=full.intercept), root, None)
    env = child_env.chunk_calibration(full_rec, root,
                                        ch.encode_configs(chunk_configs(configs)), chunk_s,
                                        max_chunks, budget_s)
    t0 = time.monotonic()
    tick = None
    if status is not None:
        def tick() -> None:
            k = chunk_under_way(root)
            left = "" if budget_s is None else \
                f", {max(budget_s - (time.monotonic() - t0), 0):.0f} s of its budget left"
            status(f"calibrating: chunk {k} of at most {max_chunks}{left}" if k else
                   "calibrating: running the command to its first progress report")
        tick()
    _wall, _cpu, rc = run_once(command, env, root, None, tick)
    lines = (root / ch.RESULTS).read_text().splitlines() if (root / ch.RESULTS).exists() \
        else []
    why = (root / "stopped.txt").read_text().strip() if (root / "stopped.txt").exists() \
        else "the workload ended"
    if rc != 0:
        raise RLScopeError(f"the calibration run exited with status {rc}; see "
                           f"{root / 'output.log'}")
    if status is not None:
        status(f"calibrating: counting the events in the {len(lines)} copies' traces")
    records = []
    for line in lines:
        r = json.loads(line)
        d = root / r["directory"]
        counts = count_events(read_trace(d)) if r["config"] != UNINSTRUMENTED else {}
        counts.pop(PROCESS, None)  # paid before the chunk's clocks start
        counts.pop(RLSCOPE_IMPORT, None)
        records.append(RunRecord(RunSample(r["config"], int(r["chunk"]),
                                           r["thread_cpu_ns"] / 1e9, counts,
                                           r["wall_ns"] / 1e9, int(r["boundaries"])),
                                 str(d), 0))
    if echo and not why.startswith(ch.CANNOT_FORK):  # that one, rls-prof says itself
        n = len({x.sample.round for x in records})
        echo(f"{n} chunks of {len({x.sample.config for x in records})} configurations in "
             f"{time.monotonic() - t0:.1f} s ({why})")
    return records, why

