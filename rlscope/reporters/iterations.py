"""Actor/learner training iterations (rlscope.analysis.actors): per iteration, the
driver's parts and the critical one; per role, sampling / update / weight sync / waiting;
one report section (key ``iterations``)."""

from __future__ import annotations

from typing import Any

from rlscope.analysis.actors import Iterations, role_summary
from rlscope.analysis.actors.iterations import PART_ROLE
from rlscope.reporters.section import Section
from rlscope.reporters.units import seconds

KEY = "iterations"


def to_dict(it: Iterations) -> dict[str, Any]:
    """``iterations``: one row per iteration; ``roles``: per iteration and process;
    ``summary``: per process over the steady iterations."""
    out = it.to_dict()
    out["summary"] = role_summary(it).to_dict(orient="records")
    out["steady"] = [int(i) for i in it.steady()["iteration"]]
    return out


def _table(head: list[str], body: list[list[str]], left: tuple[int, ...]) -> list[str]:
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i in left else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    return ["  " + line(c) for c in [head, ["-" * w for w in widths], *body]]


def _pct(x: float, w: float) -> str:
    return f"{100 * x / w:.0f}%" if w > 0 else ""


def render_text(it: Iterations) -> str:
    t = it.table
    learner = (f"{len(it.learners)} remote learner(s)" if it.learners
               else "the driver's local learner")
    title = (f"Training iterations{f' ({it.algorithm})' if it.algorithm else ''}: "
             f"{len(t)} iteration(s) of driver {it.driver_pid}; {len(it.runners)} env "
             f"runner(s), {learner}")
    head = ["Iter", "Wall s", "Sampling s", "(rounds s)", "Learner s", "Sync s", "Driver s",
            "Slowest sample() s", "Critical path"]
    body = [[str(r.iteration), seconds(r.wall_s),
             f"{seconds(r.sampling_s)} {_pct(r.sampling_s, r.wall_s):>4}",
             seconds(r.rounds_s),
             f"{seconds(r.learner_s)} {_pct(r.learner_s, r.wall_s):>4}",
             f"{seconds(r.sync_s)} {_pct(r.sync_s, r.wall_s):>4}",
             f"{seconds(r.driver_s)} {_pct(r.driver_s, r.wall_s):>4}",
             "" if r.sample_max_s != r.sample_max_s else seconds(r.sample_max_s),
             f"{PART_ROLE[r.critical]} ({100 * r.critical_share:.0f}%)"]
            for r in t.itertuples(index=False)]
    lines = [title, *_table(head, body, (0, 8))]
    s = role_summary(it)
    steady = it.steady()
    which = ("all" if len(steady) == len(t) else
             f"iterations {int(steady['iteration'].iloc[0])}-{int(steady['iteration'].iloc[-1])}")
    lines.append(f"  Per role ({which}; the first is warm-up when there are 3 or more):")
    head = ["Role", "Pid", "Name", "Sampling s", "Update s", "Sync s", "Waiting s"]
    body = [[str(r.role), str(r.pid), str(r.name),
             f"{seconds(r.sampling_s)} {_pct(r.sampling_s, r.wall_s):>4}",
             f"{seconds(r.update_s)} {_pct(r.update_s, r.wall_s):>4}",
             f"{seconds(r.sync_s)} {_pct(r.sync_s, r.wall_s):>4}",
             f"{seconds(r.waiting_s)} {_pct(r.waiting_s, r.wall_s):>4}"]
            for r in s.itertuples(index=False)]
    lines += ["  " + x for x in _table(head, body, (0, 2))]
    lines.append("  Sampling: the driver's sampling phase (rounds: remote sample() calls "
                 "out, the driver waiting on its env runners); a runner's sampling: its "
                 "sample() calls; the driver's waiting: rounds (and remote learners' "
                 "updates).")
    lines += [f"  warning: {w}" for w in it.warnings]
    return "\n".join(lines)


def section(it: Iterations) -> Section:
    """The report's training-iterations section."""
    return Section(KEY, lambda: to_dict(it), lambda: render_text(it))
