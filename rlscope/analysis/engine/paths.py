"""Interning of operation paths ("backprop > forward") and phase names across processes."""

from __future__ import annotations

import numpy as np

UNANNOTATED = "(unannotated)"
STARTUP = "(start-up)"
STARTUP_IMPORTS = "imports"
PATH_SEP = " > "
# Reserved path ids: outside any operation, and the main thread's start-up (recording
# start to the first user event, docs/analysis.md#start-up) with its imports. They are
# rows of every table but not operations: operation ids start at FIRST_OPERATION_ID.
UNANNOTATED_ID = 0
STARTUP_ID = 1
STARTUP_IMPORTS_ID = 2
FIRST_OPERATION_ID = 3


class PathTable:
    """Path id 0 is "outside any operation", 1 and 2 the start-up and its imports; id
    k >= FIRST_OPERATION_ID is (parent id, name) of an operation."""

    def __init__(self) -> None:
        self._ids: dict[tuple[int, str], int] = {}
        self.parent: list[int] = [-1, -1, STARTUP_ID]
        self.name: list[str] = [UNANNOTATED, STARTUP, STARTUP_IMPORTS]
        self.depth: list[int] = [-1, 0, 1]

    def __len__(self) -> int:
        return len(self.parent)

    def intern(self, parent: int, name: str) -> int:
        key = (parent, name)
        pid = self._ids.get(key)
        if pid is None:
            pid = self._ids[key] = len(self.parent)
            self.parent.append(parent)
            self.name.append(name)
            self.depth.append(self.depth[parent] + 1 if parent > 0 else 0)
        return pid

    def intern_many(self, parents: np.ndarray, name_ids: np.ndarray,
                    strings: list[str],
                    firsts: list[tuple[np.ndarray, np.ndarray]] | None = None
                    ) -> np.ndarray:
        """Vectorised :meth:`intern` (few distinct pairs, many rows). With ``firsts``,
        appends (path ids, row of each one's first appearance)."""
        if not len(parents):
            return np.zeros(0, np.int32)
        key = parents.astype(np.int64) << 32 | name_ids.astype(np.int64)
        uniq, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        ids = np.zeros(len(uniq), np.int32)
        for j in np.argsort(first).tolist():  # intern in order of first appearance
            k = int(uniq[j])
            ids[j] = self.intern(k >> 32, strings[k & 0xFFFFFFFF])
        if firsts is not None:
            firsts.append((ids, first))
        return ids[inverse]

    def is_operation(self, pid: int) -> bool:
        return pid >= FIRST_OPERATION_ID

    def path(self, pid: int) -> str:
        parts = []
        while pid > 0:
            parts.append(self.name[pid])
            pid = self.parent[pid]
        return PATH_SEP.join(reversed(parts)) or UNANNOTATED

    def ancestors(self, pid: int) -> list[int]:
        """``pid`` and every enclosing path id (not 0; the imports' is the start-up)."""
        out = []
        while pid > 0:
            out.append(pid)
            pid = self.parent[pid]
        return out


class NameTable:
    """Phase names; id 0 is "no phase"."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {"": 0}
        self.names: list[str] = [""]

    def intern(self, name: str) -> int:
        i = self._ids.get(name)
        if i is None:
            i = self._ids[name] = len(self.names)
            self.names.append(name)
        return i
