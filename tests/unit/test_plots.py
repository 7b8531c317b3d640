"""Figures: full operation paths, the table's row order, no figure for a process with
nothing to show, axes that say self or wall, colours colour-blind readers can tell
apart."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from rlscope.analysis import analyze
from rlscope.analysis.engine.synthetic import process_trace
from rlscope.reporters import compare as cmp
from rlscope.reporters import plots
from rlscope.trace import format as fmt
from rlscope.trace import gpu as G
from rlscope.trace.data import Trace

OB, OE = fmt.OPERATION_BEGIN, fmt.OPERATION_END
BB, BE = fmt.BACKEND_CALL_BEGIN, fmt.BACKEND_CALL_END
START, END = fmt.PROCESS_START, fmt.PROCESS_END


def _op(t: int, path: list[str], inner: list[tuple] = (), length: int = 10) -> list[tuple]:
    """Events of nested operations ``path`` from t, ``inner`` events at their start."""
    ev = [(t + i, 0, OB, n) for i, n in enumerate(path)]
    ev += [(t + len(path) + j, 0, k, n) for j, (k, n) in enumerate(inner)]
    ev += [(t + length - i, 0, OE, n) for i, n in enumerate(reversed(path))]
    return ev


# "forward" under two parents; the smaller one first in time, so size order differs.
MAIN = [(0, 0, START, ""),
        *_op(100, ["inference", "forward"], [(BB, "torch.mm"), (BE, "torch.mm")], 20),
        *_op(200, ["backprop", "forward"], [(BB, "torch.mm"), (BE, "torch.mm")], 60),
        *_op(300, ["backprop", "backward"], length=30), (400, 0, END, "")]


def analysis(*extra):
    main = process_trace(MAIN, pid=100, ppid=1, argv=["python", "train.py"])
    return analyze(Trace(Path("."), {}, [main, *extra]))


def ticks(ax) -> list[str]:
    return [t.get_text() for t in ax.get_yticklabels()]


def test_breakdown_rows_are_full_paths_in_the_table_order():
    a = analysis()
    ops = a.operations()
    table_order = list(dict.fromkeys(ops["operation"]))
    assert table_order == ["(start-up)", "inference", "inference > forward", "backprop",
                           "backprop > forward", "backprop > backward", "(unannotated)"]
    seg = plots.operation_segments(a, 100)
    assert list(seg.index) == table_order
    assert round(seg.to_numpy().sum() * 1e9) == 400  # every covered ns, once
    fig = plots.breakdown_figure(a, 100, "t")
    left, right = fig.axes[:2]
    assert ticks(left) == table_order  # first row on top (inverted y)
    assert left.get_ylim()[0] > left.get_ylim()[1]
    assert "Self time" in left.get_xlabel() and "nested operations excluded" in \
        left.get_xlabel()
    assert "self time" in right.get_xlabel()
    # Parents' wall time (nested operations included) is drawn as an outline.
    assert any(not p.get_fill() for p in left.patches)
    plots.pyplot().close(fig)


def test_transitions_rows_follow_the_same_order():
    a = analysis()
    fig = plots.transitions_figure(a, 100, "t")
    (ax,) = fig.axes
    assert ticks(ax) == ["inference > forward", "backprop > forward"]
    assert "per operation call" in ax.get_xlabel()
    plots.pyplot().close(fig)


def test_no_figures_for_a_process_with_nothing_to_show():
    idle = process_trace([(5, 0, START, ""), (390, 0, END, "")], pid=101, ppid=100,
                         argv=["python", "-c", "from multiprocessing.resource_tracker "
                                                "import main;main(3)"])
    quiet = process_trace([(5, 0, START, ""), *_op(10, ["simulation"]), (390, 0, END, "")],
                          pid=102, ppid=100, argv=["python", "worker.py"])
    a = analysis(idle, quiet)
    stems = [stem for stem, fig in plots.figures(a)]
    for _, fig in plots.figures(a):
        plots.pyplot().close(fig)
    # The idle helper: nothing; the worker without intercepted calls: no transitions.
    assert stems == ["breakdown.100", "transitions.100", "breakdown.102"]
    assert list(plots.plotted_processes(a)["pid"]) == [100, 102]


def test_long_paths_keep_their_ends_and_stay_distinct():
    long = "collect > rollout > policy > inference > forward"
    assert plots.row_labels([long], width=30) == ["collect > … > forward"]
    twins = ["a > very long middle part one > x", "a > very long middle part two > x"]
    assert plots.row_labels(twins, width=20) == twins  # shortened alike: full paths
    assert plots.row_labels(["(start-up) > imports"]) == ["(start-up) > imports"]


def test_compare_figure_labels_full_paths():
    a, b = analysis(), analysis()
    df = cmp.compare([[a], [b]], ["x", "y"])
    fig = cmp.figure(df, ["x", "y"])
    (ax,) = fig.axes
    labels = ticks(ax)
    assert "inference > forward" in labels and "backprop > forward" in labels
    assert labels.index("(start-up)") == 0 and labels[-1] == "(unannotated)"
    assert "Self time" in ax.get_xlabel()
    plots.pyplot().close(fig)


def test_gpu_breakdown_marks_cpu_gpu_by_hatching():
    p = process_trace(
        [(0, 0, START, ""), (10, 0, OB, "a"), (50, 0, OE, "a"), (50, 0, OB, "b"),
         (100, 0, OE, "b"), (100, 0, END, "")],
        threads={0: 111}, api=[(111, 20, 25, 1, "cudaLaunchKernel"),
                               (111, 60, 90, 2, "cudaStreamSynchronize")],
        gpu=[(G.KERNEL, 7, 30, 80, 1)])
    a = analyze(Trace(Path("."), {}, [p]))
    fig = plots.breakdown_figure(a, 100, "t")
    labels = fig.legends[0].get_texts()
    assert {"CPU only: Python", "CPU+GPU: Python", "GPU only: kernel"} <= \
        {t.get_text() for t in labels}
    hatched = {p.get_hatch() for p in fig.axes[0].patches if p.get_hatch()}
    assert hatched == {plots.CPU_GPU_HATCH}
    plots.pyplot().close(fig)


# -- colour-blind readers ----------------------------------------------------------------
# Machado, Oliveira & Fernandes (2009), severity 1, on linear RGB.
CVD = {"protanopia": [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216],
                      [-0.003882, -0.048116, 1.051998]],
       "deuteranopia": [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413],
                        [-0.011820, 0.042940, 0.968881]],
       "tritanopia": [[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602],
                      [0.004733, 0.691367, 0.303900]],
       "normal vision": np.eye(3).tolist()}


def _lab(hex_colour: str, m: list[list[float]]) -> np.ndarray:
    c = np.array([int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5)])
    rgb = np.clip(np.array(m) @ np.where(c <= 0.04045, c / 12.92,
                                         ((c + 0.055) / 1.055) ** 2.4), 0, 1)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722],
                    [0.0193, 0.1192, 0.9505]]) @ rgb / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > 0.008856, np.cbrt(xyz), 7.787 * xyz + 16 / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


@pytest.mark.parametrize("vision", list(CVD))
@pytest.mark.parametrize("palette", ["categories", "runs"])
def test_colours_stay_apart_for_colour_blind_readers(vision: str, palette: str):
    """Every two colours of a figure differ by at least 12 ΔE (CIELAB) as seen with each
    kind of colour blindness, and from the white background."""
    colours = (dict(plots.CATEGORY_COLOURS) if palette == "categories"
               else {f"run {i}": c for i, c in enumerate(plots.RUN_COLOURS[:4])})
    colours["background"] = "#FFFFFF"
    lab = {n: _lab(c, CVD[vision]) for n, c in colours.items()}
    worst = min((float(np.linalg.norm(lab[x] - lab[y])), x, y)
                for x, y in itertools.combinations(lab, 2))
    assert worst[0] >= 12, worst
    # One colour per category, the same in the breakdown's segments.
    for _, cat, _, colour, _ in plots.SEGMENTS:
        assert colour == plots.CATEGORY_COLOURS[cat]
