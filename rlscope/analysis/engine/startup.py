"""A process's start-up (docs/analysis.md#start-up): the main thread's time from recording
start (PROCESS_START, in the bootstrap before the user's imports) to the process's first
user event, and the imports the recording thread made in it.

User events are the ones a program's own work produces: operation or phase begins,
progress records, env step or reset begins. Intercepted calls (backend, simulator, wait)
are not: module-level code and imports make them too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rlscope.analysis.intervals import union
from rlscope.trace import format as fmt

USER_KINDS = (fmt.OPERATION_BEGIN, fmt.PHASE_BEGIN, fmt.PROGRESS, fmt.ENV_STEP_BEGIN,
              fmt.ENV_RESET_BEGIN)
_IS_USER = np.zeros(256, bool)
_IS_USER[list(USER_KINDS)] = True


def first_user_time(time: np.ndarray, kind: np.ndarray) -> int | None:
    """Time of the earliest user event among these events (None: there is none)."""
    sel = _IS_USER[kind]
    return int(time[sel].min()) if sel.any() else None


@dataclass
class Imports:
    """Timed imports of the recording thread, by begin time."""

    names: list[str]
    begin: np.ndarray  # int64 ns
    end: np.ndarray

    def __len__(self) -> int:
        return len(self.names)

    def within(self, lo: int, hi: int) -> Imports:
        """The imports that began in [lo, hi), clipped to it."""
        sel = np.flatnonzero((self.begin >= lo) & (self.begin < hi))
        return Imports([self.names[i] for i in sel.tolist()], self.begin[sel],
                       np.minimum(self.end[sel], hi))

    def union(self) -> tuple[np.ndarray, np.ndarray]:
        """Disjoint [begin, end) runs covering every import (a record nested in another,
        possible for an extension module's own imports, counts once)."""
        return union(self.begin, self.end)


def imports(metadata: dict[str, Any]) -> Imports:
    """The import records a process's metadata holds (rlscope.inprocess.import_timer)."""
    rows = []
    for key, value in metadata.items():
        if key.startswith(fmt.META_IMPORT_PREFIX) and isinstance(value, list) \
                and len(value) == 2 and all(isinstance(v, int) for v in value):
            rows.append((value[0], value[1], key[len(fmt.META_IMPORT_PREFIX):]))
    rows.sort()
    return Imports([r[2] for r in rows], np.array([r[0] for r in rows], np.int64),
                   np.array([r[1] for r in rows], np.int64))


def without_imports(metadata: dict[str, Any]) -> dict[str, Any]:
    """The metadata less the import records (they have their own rows)."""
    return {k: v for k, v in metadata.items() if not k.startswith(fmt.META_IMPORT_PREFIX)}
