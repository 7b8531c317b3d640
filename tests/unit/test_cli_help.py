"""Help text wraps between words: every command of rls-prof and rls-analyze, rendered at
several terminal widths, shows only words of its unwrapped help (no "ten / sorflow", no
"overhead- / correction.md"), and no line is wider than the terminal unless it is a single
word too long for it."""

from __future__ import annotations

import os

import click
import pytest

from rlscope.cli import common
from rlscope.cli.analyze import analyze
from rlscope.cli.prof import prof
from tests.conftest import run_tool

WIDTHS = [60, 80, 120]
COMMANDS = [("rls-prof",), ("rls-analyze",),
            *[("rls-analyze", name) for name in sorted(analyze.commands)]]


def _unwrapped(path: tuple[str, ...]) -> str:
    """The command's help rendered on one line per paragraph (an unbounded terminal)."""
    wide = {"max_content_width": 10**6, "terminal_width": 10**6}
    root = prof if path[0] == "rls-prof" else analyze
    ctx = click.Context(root, info_name=path[0], **wide, **root.context_settings)
    cmd: click.Command = root
    for name in path[1:]:
        assert isinstance(cmd, click.Group)
        cmd = cmd.commands[name]
        ctx = click.Context(cmd, info_name=name, parent=ctx, **wide, **cmd.context_settings)
    return cmd.get_help(ctx)


def _broken_words(shown: str, unwrapped: str) -> list[str]:
    words = set(unwrapped.split())
    # A group's command list shortens a summary to fit, at a word, ending in "...".
    return [t for t in shown.split()
            if t not in words and not (t.endswith("...") and t[:-3] in words)]


def _overlong(shown: str, columns: int) -> list[str]:
    return [line for line in shown.splitlines()
            if len(line) > columns and len(line.split()) > 1]


@pytest.mark.parametrize("columns", WIDTHS)
@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_help_wraps_between_words(path: tuple[str, ...], columns: int,
                                  monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    # In-process through the same entry point as the scripts (common.run), the terminal
    # width from COLUMNS as on a terminal; the subprocess test below checks the scripts.
    monkeypatch.setenv("COLUMNS", str(columns))
    root = prof if path[0] == "rls-prof" else analyze
    assert common.run(root, path[0], [*path[1:], "--help"]) == 0
    shown = capsys.readouterr().out
    unwrapped = _unwrapped(path)
    assert shown.startswith("Usage: " + " ".join(path))
    assert _broken_words(shown, unwrapped) == []
    assert _overlong(shown, columns) == []
    # It did wrap, so the checks above are not vacuous (the group's list of commands
    # shortens its summaries instead).
    if columns < 80 and path != ("rls-analyze",):
        assert len(shown.splitlines()) > len(unwrapped.splitlines())


@pytest.mark.parametrize("path", [("rls-prof",), ("rls-analyze", "timeline")], ids=" ".join)
def test_help_of_the_installed_commands(path: tuple[str, ...]) -> None:
    r = run_tool(path[0], *path[1:], "--help", env={**os.environ, "COLUMNS": "60"})
    assert r.returncode == 0, r.stderr
    assert _broken_words(r.stdout, _unwrapped(path)) == []
    assert _overlong(r.stdout, 60) == []
    # what the issue saw: the library list and a hyphenated path broken inside a word
    if path == ("rls-prof",):
        assert "tensorflow," in r.stdout.split()
        assert "(docs/overhead-correction.md)." in r.stdout.split()


def test_a_word_longer_than_the_line_stays_whole() -> None:
    lines = common.wrap_paragraphs("see docs/a-very-long-file-name-indeed.md now", 12, "  ")
    assert lines == ["  see", "  docs/a-very-long-file-name-indeed.md", "  now"]
    assert common.wrap_paragraphs("\b\n  a   b\n  c", 3) == ["  a   b", "  c"]
