"""Which envs the batches of an async vector env held: a tally of the env ids that
sampled ``recv`` calls returned, for vector envs that hand back whichever envs are done
first (EnvPool and PufferLib's worker backends in async mode). An env that steps slower
than the others is in fewer batches (rlscope.analysis.lockstep.batches tells which).

The first ``Tally.FIRST`` batches are all counted, then about one in ``Tally.EVERY`` (a
random stride, so batches that alternate between groups of envs are all seen); the
counts are written as metadata (format.META_ASYNC_BATCHES_PREFIX) every
``Tally.PUBLISH`` tallies and when recording stops. A Python call per ``recv``, and the
count on the sampled ones, whatever the number of envs.
"""

from __future__ import annotations

import json
import os
import random
import weakref
from collections.abc import Callable
from typing import Any

from rlscope import annotate
from rlscope.trace import format as fmt


class Tally:
    """Which envs the batches of one async vector env held, on sampled batches."""

    FIRST = 64  # the first batches are all tallied (short runs: counts that tell)
    EVERY = 16  # then a batch in about this many
    PUBLISH = 64  # tallies between two writes of the counts

    def __init__(self, name: str, library: str, num_envs: int, batch_size: int,
                 ids: Callable[[Any], Any]) -> None:
        """``ids(out)``: the env ids of the batch ``recv`` returned as ``out``."""
        import numpy as np

        self.name, self.library, self.batch_size, self.ids = name, library, batch_size, ids
        self.counts = np.zeros(num_envs, dtype=np.int64)
        self.batches = 0
        self.tallied = 0
        self.next = 1  # the batch number tallied next
        self.rng = random.Random(0)
        _tallies.add(self)

    def restart(self) -> None:
        self.counts[:] = 0
        self.batches = self.tallied = 0
        self.next = 1

    def tap(self, recv: Callable[..., Any]) -> Callable[..., Any]:
        """``recv`` with its batches tallied."""
        def tapped(*args: Any, **kwargs: Any) -> Any:
            out = recv(*args, **kwargs)
            self.batches += 1
            if self.batches >= self.next:
                self.add(out)
            return out
        return tapped

    def add(self, out: Any) -> None:
        # Then strides of 8..24 batches: odd and even ones, so no period of the batches'
        # order (two groups of envs in turns, ...) hides a group.
        self.next = self.batches + (1 if self.tallied < self.FIRST else
                                    self.rng.randint(self.EVERY // 2, self.EVERY * 3 // 2))
        try:
            self.counts[self.ids(out)] += 1  # the ids of one batch are distinct
        except (IndexError, KeyError, TypeError, ValueError):
            return
        self.tallied += 1
        if self.tallied % self.PUBLISH == 0:
            rec = annotate.active_recorder()
            if rec is not None:
                self.publish(rec)

    def publish(self, rec: Any) -> None:
        if not self.tallied:
            return
        rec.metadata(fmt.META_ASYNC_BATCHES_PREFIX + self.name, json.dumps({
            "library": self.library, "num_envs": len(self.counts),
            "batch_size": self.batch_size, "batches": self.batches,
            "tallied": self.tallied, "counts": self.counts.tolist()}))


# The live vector envs' tallies (one that is gone publishes nothing): written when a
# recording stops, then counted afresh for the next one; a forked child counts its own
# batches, not its parent's (its trace is its own).
_tallies: weakref.WeakSet[Tally] = weakref.WeakSet()


def _publish_at_stop(rec: Any) -> None:
    for t in list(_tallies):
        t.publish(rec)
        t.restart()


def _restart_in_child() -> None:
    for t in list(_tallies):
        t.restart()


annotate.before_stop(_publish_at_stop)
os.register_at_fork(after_in_child=_restart_in_child)
