"""Shared command-line plumbing: every user error is one line on stderr, no traceback;
help text wrapped between words; a status line for long steps."""

from __future__ import annotations

import shutil
import sys
import textwrap
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TextIO

import click

from rlscope.errors import RLScopeError

# click >= 8.2 raises this when a command that needs arguments gets none.
_NO_ARGS_IS_HELP: tuple[type, ...] = tuple(
    t for t in [getattr(click.exceptions, "NoArgsIsHelpError", None)] if t is not None)


def wrap_paragraphs(text: str, width: int, indent: str = "") -> list[str]:
    """``text`` filled to ``width`` columns, breaking lines only at spaces: never inside a
    word, a hyphenated name (``docs/overhead-correction.md``, ``--calibrate-by``) or a
    comma list; a word longer than the line stays whole and overflows it. Paragraphs are
    separated by blank lines and keep their own indentation; one whose first line is
    ``\\b`` (click's convention) is kept as written."""
    out: list[str] = []
    for par in text.split("\n\n"):
        lines = [line for line in par.splitlines() if line.strip()]
        if not lines:
            continue
        if out:
            out.append("")
        if lines[0].strip() == "\b":
            out.extend(indent + line for line in lines[1:])
            continue
        own = indent + " " * (len(lines[0]) - len(lines[0].lstrip()))
        out.extend(textwrap.wrap(
            " ".join(line.strip() for line in lines), max(width, len(own) + 10),
            initial_indent=own, subsequent_indent=own,
            break_long_words=False, break_on_hyphens=False) or [own])
    return out


class HelpFormatter(click.HelpFormatter):
    """click's help layout, wrapped between words: click's own wrapper breaks a token
    longer than the column and breaks at hyphens ("ten / sorflow", "overhead- /
    correction.md")."""

    def write_text(self, text: str) -> None:
        for line in wrap_paragraphs(text, self.width, " " * self.current_indent):
            self.write(line + "\n" if line else "\n")

    def write_dl(self, rows: Iterable[tuple[str, str]], col_max: int = 30,
                 col_spacing: int = 2) -> None:
        rows = list(rows)
        if not rows:
            return
        indent = " " * self.current_indent
        first_col = min(max(len(term) for term, *_ in rows), col_max) + col_spacing
        hang = " " * (self.current_indent + first_col)
        text_width = max(self.width - first_col - self.current_indent, 10)
        for term, *rest in rows:
            definition = rest[0] if rest else ""
            self.write(indent + term)
            if not definition:
                self.write("\n")
                continue
            lines = wrap_paragraphs(definition, text_width)
            if len(term) <= first_col - col_spacing:
                self.write(" " * (first_col - len(term)) + lines[0] + "\n")
                lines = lines[1:]
            else:  # a long option: its help starts on the next line
                self.write("\n")
            for line in lines:
                self.write(hang + line + "\n" if line else "\n")


class Context(click.Context):
    formatter_class = HelpFormatter


def wrap_help_on_words(command: click.Command) -> click.Command:
    """Make ``command`` and its subcommands format their help with HelpFormatter."""
    command.context_class = Context
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            wrap_help_on_words(sub)
    return command


class StatusLine:
    """What a long step is doing, on ``stream`` (stderr): on a terminal one line redrawn
    in place with the time since the start; otherwise (a log, a pipe) a plain line when
    the text changes, at most one every ``every_s`` seconds. :meth:`echo` prints a line
    that stays, above the status line."""

    def __init__(self, prefix: str, stream: TextIO | None = None, every_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.prefix, self.every_s, self.clock = prefix, every_s, clock
        self.stream = stream if stream is not None else sys.stderr
        try:
            self.tty = self.stream.isatty()
        except (AttributeError, ValueError):
            self.tty = False
        self.t0 = clock()
        self.text = ""  # the current status ("" none)
        self.drawn = False  # the terminal's last line is the status line
        self.last_plain: tuple[str, float] | None = None  # (text, when) printed

    def update(self, text: str) -> None:
        """The current status (called again with the same text to refresh the time)."""
        now = self.clock()
        self.text = text
        if self.tty:
            self._draw(now)
        elif self.last_plain is None or (text != self.last_plain[0]
                                         and now - self.last_plain[1] >= self.every_s):
            self._write(f"{self.prefix}{text} ({_elapsed(now - self.t0)})\n")
            self.last_plain = (text, now)

    def echo(self, line: str) -> None:
        self.clear()
        self._write(line + "\n")
        if self.tty and self.text:
            self._draw(self.clock())

    def clear(self) -> None:
        """Take the status line off the terminal (before other output, and at the end)."""
        if self.drawn:
            self._write("\r\x1b[K")
            self.drawn = False

    def elapsed(self) -> str:
        """The time since the start: "47 s", "2 min 05 s"."""
        return _elapsed(self.clock() - self.t0)

    def done(self) -> None:
        self.clear()
        self.text = ""

    def _draw(self, now: float) -> None:
        line = f"{self.prefix}{self.text} ({_elapsed(now - self.t0)})"
        width = shutil.get_terminal_size().columns
        if len(line) >= width:  # one row, or \r would not go back to its start
            line = line[:max(width - 4, 1)] + "..."
        self._write("\r\x1b[K" + line)
        self.drawn = True

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()


def _elapsed(s: float) -> str:
    s = int(s)
    return f"{s} s" if s < 60 else f"{s // 60} min {s % 60:02d} s"


def run(command: click.Command, prog: str, argv: Sequence[str] | None = None,
        check: Callable[[list[str]], None] | None = None) -> int:
    """Run a click command; return its exit status, turning errors into one line.
    ``check`` looks at the arguments first and may raise a click.UsageError of its own
    (a mistake click would report less helpfully). Help is wrapped between words."""
    wrap_help_on_words(command)
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if check is not None:
            check(args)
        rv = command.main(args=args, prog_name=prog, standalone_mode=False)
    except click.UsageError as e:
        if isinstance(e, _NO_ARGS_IS_HELP):
            click.echo(e.ctx.get_help() if e.ctx else e.format_message())
            return 2
        hint = f"{e.ctx.command_path} --help" if e.ctx else f"{prog} --help"
        click.echo(f"{prog}: error: {e.format_message()} (see {hint})", err=True)
        return 2
    except click.exceptions.Abort:
        click.echo(f"{prog}: aborted", err=True)
        return 130
    except click.ClickException as e:
        click.echo(f"{prog}: error: {e.format_message()}", err=True)
        return e.exit_code
    except RLScopeError as e:
        click.echo(f"{prog}: error: {e}", err=True)
        return 2
    except BrokenPipeError:
        sys.stderr.close()  # output piped into head & co: not an error
        return 0
    except KeyboardInterrupt:
        click.echo(f"{prog}: interrupted", err=True)
        return 130
    return rv if isinstance(rv, int) else 0
