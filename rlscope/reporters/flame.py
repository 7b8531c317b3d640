"""Flame graphs of one operation's Python stack samples (rlscope.analysis.hotspots): a
speedscope file (https://www.speedscope.app, "sampled" profile, weights in samples) and a
standalone SVG (root at the bottom, widths in samples). Builds the documents; the command
writes them."""

from __future__ import annotations

import re
from html import escape
from typing import Any

from rlscope import __version__
from rlscope.analysis.engine import categories as C
from rlscope.analysis.engine.paths import PATH_SEP
from rlscope.analysis.hotspots import Samples

SCHEMA = "https://www.speedscope.app/file-format-schema.json"
SVG_WIDTH = 1200
ROW_PX = 17
MIN_PX = 0.5  # narrower boxes are not drawn


def _frame_label(s: Samples, f: int) -> tuple[str, str | None, int | None]:
    if f < 0:  # an intercepted call the sample was taken in (hotspots.flame_stacks)
        return f"[{C.CATEGORY_NAMES[-1 - f]}]", None, None
    file, line, name = s.functions[f]
    return name, file, line


def speedscope(s: Samples, operation: str, stacks: dict[tuple[int, ...], int]
               ) -> dict[str, Any]:
    """The speedscope document of one operation: ``stacks`` is (stack, samples)."""
    index: dict[int, int] = {}
    frames: list[dict[str, Any]] = []
    samples, weights = [], []
    for st, n in sorted(stacks.items()):
        row = []
        for f in st:
            i = index.get(f)
            if i is None:
                i = index[f] = len(frames)
                name, file, line = _frame_label(s, f)
                fr: dict[str, Any] = {"name": name}
                if file is not None:
                    fr.update(file=file, line=line)
                frames.append(fr)
            row.append(i)
        samples.append(row)
        weights.append(n)
    total = sum(weights)
    return {"$schema": SCHEMA, "shared": {"frames": frames},
            "profiles": [{"type": "sampled", "name": operation, "unit": "none",
                          "startValue": 0, "endValue": total, "samples": samples,
                          "weights": weights}],
            "name": f"{operation} (Python stack samples)", "activeProfileIndex": 0,
            "exporter": f"rlscope {__version__}"}


class _Node:
    __slots__ = ("children", "n")

    def __init__(self) -> None:
        self.n = 0
        self.children: dict[int, _Node] = {}


def svg(s: Samples, operation: str, stacks: dict[tuple[int, ...], int]) -> str:
    """A flame graph as one SVG document (hover a box for its function, file:line and
    samples)."""
    root = _Node()
    for st, n in stacks.items():
        root.n += n
        node = root
        for f in st:
            node = node.children.setdefault(f, _Node())
            node.n += n
    depth = _depth(root)
    height = (depth + 2) * ROW_PX + 10
    scale = SVG_WIDTH / max(root.n, 1)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{SVG_WIDTH}" height="{height}" '
           f'font-family="monospace" font-size="11">',
           '<rect width="100%" height="100%" fill="#fff"/>',
           f'<text x="4" y="13">{escape(operation)}: {root.n:,} Python stack samples '
           f'(width: samples)</text>']
    base = height - ROW_PX - 4

    def draw(node: _Node, x: float, level: int) -> None:
        for f, child in sorted(node.children.items(), key=lambda kv: -kv[1].n):
            w = child.n * scale
            if w >= MIN_PX:
                name, file, line = _frame_label(s, f)
                where = f" ({file}:{line})" if file is not None else ""
                y = base - level * ROW_PX
                tip = f"{name}{where}: {child.n:,} samples, {100 * child.n / root.n:.1f}%"
                out.append(f'<g><title>{escape(tip)}</title><rect x="{x:.1f}" y="{y}" '
                           f'width="{w:.1f}" height="{ROW_PX - 1}" fill="{_colour(f)}"/>')
                chars = int(w / 7)
                if chars >= 3:
                    label = name if len(name) <= chars else name[:chars - 1] + "…"
                    out.append(f'<text x="{x + 2:.1f}" y="{y + 12}">{escape(label)}</text>')
                out.append("</g>")
                draw(child, x, level + 1)
            x += w

    draw(root, 0.0, 0)
    out.append("</svg>")
    return "\n".join(out)


def _depth(node: _Node) -> int:
    return 1 + max((_depth(c) for c in node.children.values()), default=0) \
        if node.children else 0


def _colour(f: int) -> str:
    if f < 0:
        return "#9db4d9"  # intercepted calls: blue
    h = (f * 2654435761) & 0xFFFF
    return f"rgb({220 + h % 35},{110 + (h >> 5) % 90},{60 + (h >> 9) % 40})"


def file_stem(operation: str) -> str:
    """A file name for an operation path: "train > inference" -> "train__inference"."""
    parts = [re.sub(r"[^A-Za-z0-9_.-]+", "_", p).strip("_.") or "_"
             for p in operation.split(PATH_SEP)]
    return "__".join(parts)[:120]
