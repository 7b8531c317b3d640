"""Shared command-line plumbing: every user error is one line on stderr, no traceback."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

import click

from rlscope.errors import RLScopeError

# click >= 8.2 raises this when a command that needs arguments gets none.
_NO_ARGS_IS_HELP: tuple[type, ...] = tuple(
    t for t in [getattr(click.exceptions, "NoArgsIsHelpError", None)] if t is not None)


def run(command: click.Command, prog: str, argv: Sequence[str] | None = None,
        check: Callable[[list[str]], None] | None = None) -> int:
    """Run a click command; return its exit status, turning errors into one line.
    ``check`` looks at the arguments first and may raise a click.UsageError of its own
    (a mistake click would report less helpfully)."""
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
