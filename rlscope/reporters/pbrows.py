"""Protobuf wire encoding of many messages of one shape at once, with numpy: a timeline
writes millions of near-identical packets, and a Python call per packet would dominate.

A message shape is a list of ``Field``s; each has constant leading bytes (its tag), then
optionally a varint per row, raw bytes per row, or a nested message (its length as a
varint, then its own fields). A row mask leaves a field out of some rows. ``encode``
returns the rows concatenated. Scalar helpers (``tag``, ``field``, ``message``) build the
few one-off messages, with the recorder's varint encoder (rlscope/recorder/wire.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rlscope.recorder.wire import varint

VARINT, FIXED64, LEN = 0, 1, 2  # wire types used here
_THRESHOLDS = np.array([1 << (7 * k) for k in range(1, 10)], np.uint64)


def tag(number: int, wire_type: int) -> bytes:
    return varint((number << 3) | wire_type)


def field(number: int, value: int | bytes | str) -> bytes:
    """One scalar field: an int as a varint, bytes or str length-delimited."""
    if isinstance(value, int):
        return tag(number, VARINT) + varint(value)
    data = value.encode() if isinstance(value, str) else value
    return tag(number, LEN) + varint(len(data)) + data


def message(number: int, *parts: bytes) -> bytes:
    """A nested message field made of already encoded fields."""
    return field(number, b"".join(parts))


@dataclass
class Field:
    prefix: bytes  # constant bytes written first (the tag, maybe more)
    values: np.ndarray | None = None  # uint64 varint per row
    raw: np.ndarray | None = None  # (rows, k) uint8 written as is (e.g. a double)
    inner: Sequence[Field] | None = None  # nested message: varint length, then these
    mask: np.ndarray | None = None  # bool per row: write the field in these rows only


def varint_len(v: np.ndarray) -> np.ndarray:
    return np.searchsorted(_THRESHOLDS, v, side="right").astype(np.int64) + 1


@dataclass
class _Flat:
    prefix: bytes
    values: np.ndarray | None  # varint per row
    vlen: np.ndarray | None
    raw: np.ndarray | None
    mask: np.ndarray | None


def _flatten(fields: Sequence[Field], n: int, out: list[_Flat]) -> np.ndarray:
    """Append the fields (nested ones expanded) to ``out``; return each row's length."""
    total = np.zeros(n, np.int64)
    for f in fields:
        if f.inner is not None:
            if f.mask is not None:
                raise ValueError("a nested message cannot be masked")
            slot = len(out)
            out.append(_Flat(f.prefix, None, None, None, None))  # length filled below
            inner_len = _flatten(f.inner, n, out)
            lv = inner_len.astype(np.uint64)
            ll = varint_len(lv)
            out[slot] = _Flat(f.prefix, lv, ll, None, None)
            total += len(f.prefix) + ll + inner_len
            continue
        size = np.full(n, len(f.prefix), np.int64)
        vlen = None
        if f.values is not None:
            vlen = varint_len(f.values)
            size += vlen
        if f.raw is not None:
            size += f.raw.shape[1]
        if f.mask is not None:
            size = np.where(f.mask, size, 0)
        total += size
        out.append(_Flat(f.prefix, f.values, vlen, f.raw, f.mask))
    return total


def encode(fields: Sequence[Field], n: int) -> np.ndarray:
    """``n`` rows of the message shape ``fields``, concatenated (uint8)."""
    flat: list[_Flat] = []
    lengths = _flatten(fields, n, flat)
    buf = np.empty(int(lengths.sum()), np.uint8)
    pos = np.cumsum(lengths) - lengths  # where each row's next byte goes
    for f in flat:
        rows = None if f.mask is None else np.flatnonzero(f.mask)
        p = pos if rows is None else pos[rows]
        for j, b in enumerate(f.prefix):
            buf[p + j] = b
        p = p + len(f.prefix)
        if f.values is not None:
            assert f.vlen is not None
            v = f.values if rows is None else f.values[rows]
            vl = f.vlen if rows is None else f.vlen[rows]
            _put_varints(buf, p, v, vl)
            p = p + vl
        if f.raw is not None:
            r = f.raw if rows is None else f.raw[rows]
            for j in range(r.shape[1]):
                buf[p + j] = r[:, j]
            p = p + r.shape[1]
        if rows is None:
            pos = p
        else:
            pos[rows] = p
    return buf


def _put_varints(buf: np.ndarray, pos: np.ndarray, v: np.ndarray, vlen: np.ndarray) -> None:
    v = v.astype(np.uint64, copy=False)
    for k in range(int(vlen.max()) if len(vlen) else 0):
        sel = None if k == 0 else np.flatnonzero(vlen > k)
        vv = v if sel is None else v[sel]
        byte = ((vv >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8)
        more = (vlen > k + 1) if sel is None else (vlen[sel] > k + 1)
        byte |= more.astype(np.uint8) << 7
        if sel is None:
            buf[pos + k] = byte
        else:
            buf[pos[sel] + k] = byte
