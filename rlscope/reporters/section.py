"""The reporter protocol: a reporter turns analysed data into :class:`Section` s (the same
content as text lines and as JSON-able data) and/or figures; it does no I/O. A command
composes sections into one :class:`Report` and writes it, serialised once.

To add a reporter: a module in rlscope/reporters/ with a function returning a ``Section``
(``key``: its name in the JSON report) or ``figures(...) -> list[(stem, Figure)]``; the
command that shows it adds it to its report (docs/architecture.md).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Section:
    """One part of a report. ``data`` and ``text`` are computed when asked for, so a
    JSON report never renders text and a text report never builds JSON."""

    key: str
    data: Callable[[], Any]
    text: Callable[[], str]
    merge: bool = False  # its data is a dict whose keys go at the top of the JSON report


@dataclass
class Report:
    sections: Sequence[Section]

    def to_data(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for s in self.sections:
            d = s.data()
            if s.merge:
                out.update(d)
            else:
                out[s.key] = d
        return out

    def to_json(self) -> str:
        return json.dumps(plain(self.to_data()), indent=2)

    def to_text(self) -> str:
        return "\n\n".join(t for t in (s.text() for s in self.sections) if t)


def plain(x: Any) -> Any:
    """JSON-ready: numpy scalars and arrays to Python, NaN to None."""
    if isinstance(x, dict):
        return {str(k): plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [plain(v) for v in x]
    if isinstance(x, np.ndarray):
        return [plain(v) for v in x.tolist()]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and math.isnan(x):
        return None
    return x
