"""Group-by-sum over small integer columns with numpy (one bincount per batch)."""

from __future__ import annotations

import numpy as np

DENSE_LIMIT = 1 << 22  # bincount over a dense key space up to this size, else np.unique


def encode(columns: list[np.ndarray], sizes: list[int]) -> np.ndarray:
    """One int64 key per row from integer columns, each in [0, size)."""
    key = columns[0].astype(np.int64)
    for col, size in zip(columns[1:], sizes[1:], strict=True):
        key *= size
        key += col
    return key


def aggregate_keys(key: np.ndarray, sizes: list[int], weights: np.ndarray
                    ) -> tuple[list[np.ndarray], np.ndarray]:
    """Sum ``weights`` per key; decode the non-zero groups back into columns."""
    total = int(np.prod(np.array(sizes, dtype=np.float64)))
    if total <= DENSE_LIMIT:
        sums = np.bincount(key, weights=weights, minlength=total)
        uniq = np.flatnonzero(sums)
        sums = sums[uniq]
    else:
        uniq, inverse = np.unique(key, return_inverse=True)
        sums = np.bincount(inverse, weights=weights)
        nz = sums != 0
        uniq, sums = uniq[nz], sums[nz]
    out = []
    for size in reversed(sizes):
        out.append(uniq % size)
        uniq = uniq // size
    return out[::-1], sums


def aggregate(columns: list[np.ndarray], sizes: list[int], weights: np.ndarray
               ) -> tuple[list[np.ndarray], np.ndarray]:
    """Group rows by integer columns (each in [0, size)) and sum ``weights``."""
    return aggregate_keys(encode(columns, sizes), sizes, weights)
