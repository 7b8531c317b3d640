"""``rls-analyze live``: follow a run directory while it records, in the terminal (curses,
from the standard library) and/or as TensorBoard scalars. Reads only what the processes
append (rlscope.analysis.live); never touches the profiled processes."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from rlscope.analysis.live import LiveRun, Snapshot
from rlscope.errors import RLScopeError
from rlscope.reporters import live as view

_KEY_TAB = 9


class Tensorboard:
    """Scalars of each snapshot into LOGDIR through tensorboardX's event-file writer (the
    ``tensorboard`` extra), on the live side: the profiled processes never see it."""

    def __init__(self, logdir: Path) -> None:
        try:
            from tensorboardX import SummaryWriter
        except ImportError:
            raise RLScopeError("--tensorboard needs tensorboardX, which this install lacks: "
                               "pip install 'rlscope[tensorboard]' (or pip install "
                               "tensorboardX)") from None
        try:
            self.writer = SummaryWriter(logdir=str(logdir), flush_secs=5)
        except OSError as e:
            raise RLScopeError(f"cannot write TensorBoard events to {logdir}: "
                               f"{e.strerror}") from None
        self.last_step: int | None = None

    def add(self, s: Snapshot) -> None:
        step, values = view.scalars(s)
        if step is None:
            step = int(s.time_s)
        if step == self.last_step or not values:
            return  # no progress since the last write: the same point again
        self.last_step = step
        for tag, v in values.items():
            self.writer.add_scalar(tag, v, global_step=step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


def follow(directory: Path, refresh_s: float, tensorboard: Path | None, once: bool,
           until_done: bool) -> None:
    if (directory.exists() and not directory.is_dir()) or (once and not directory.exists()):
        raise RLScopeError(f"{directory} is not a directory: give the run directory rls-prof "
                           "records into (rls-prof -o DIR)")
    # A directory not there yet is waited for: the view may start before the run.
    live = LiveRun(directory)
    tb = Tensorboard(tensorboard) if tensorboard is not None else None
    try:
        if once or until_done or not sys.stdout.isatty():
            _plain(live, refresh_s, tb, until_done)
        else:
            import curses

            curses.wrapper(_screen, live, refresh_s, tb)
    except KeyboardInterrupt:
        pass
    finally:
        if tb is not None:
            tb.close()


def _plain(live: LiveRun, refresh_s: float, tb: Tensorboard | None, until_done: bool) -> None:
    """No terminal: one refresh printed (``--once``), or, with ``--until-done``, follow
    until every process has ended, writing TensorBoard only."""
    snap = live.poll()  # what is there already: the next poll's "last interval" starts here
    if tb is not None:
        tb.add(snap)
    while True:
        time.sleep(refresh_s)
        snap = live.poll()
        if tb is not None:
            tb.add(snap)
        if not until_done:
            print("\n".join(view.screen(snap, view.Selection(), width=120, height=60)))
            return
        if snap.processes and not snap.running:
            return


def _screen(stdscr: Any, live: LiveRun, refresh_s: float, tb: Tensorboard | None) -> None:
    import curses

    try:
        curses.curs_set(0)
    except curses.error:
        pass  # a terminal without cursor control
    stdscr.timeout(100)  # getch waits at most 0.1 s: keys answer at once, refresh on time
    sel = view.Selection()
    snap = live.poll()
    due = time.monotonic() + refresh_s
    while True:
        h, w = stdscr.getmaxyx()
        stdscr.erase()
        for i, line in enumerate(view.screen(snap, sel, width=w - 1, height=h)):
            try:
                stdscr.addnstr(i, 0, line, w - 1)
            except curses.error:
                break  # the last line of a small window
        stdscr.refresh()
        key = stdscr.getch()
        if key in (ord("q"), ord("Q")):
            return
        if key in (_KEY_TAB, ord("n"), curses.KEY_DOWN):
            sel.process += 1
        elif key in (ord("N"), curses.KEY_BTAB, curses.KEY_UP):
            sel.process -= 1
        elif key == ord("p"):
            sel.phase = _next_phase(snap, sel)
        if time.monotonic() >= due:
            snap = live.poll()
            if tb is not None:
                tb.add(snap)
            due = time.monotonic() + refresh_s


def _next_phase(snap: Snapshot, sel: view.Selection) -> str:
    tree = view.ordered(snap)
    if not tree:
        return view.ALL
    phases = [view.ALL, *tree[sel.process % len(tree)][1].phases]
    i = phases.index(sel.phase) if sel.phase in phases else 0
    return phases[(i + 1) % len(phases)]
