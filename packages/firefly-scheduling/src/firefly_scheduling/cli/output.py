"""How commands print: rich tables for people, JSON Lines for machines.

* `--json` (`json_option`) switches a command to JSON Lines: one object per row,
  one row per line, keys stable across releases (documented in docs/monitoring.md),
  `null` where a table shows `-`. JSON Lines rather than one array so that a
  consumer can stream (`| jq -c 'select(.state == "failed")'`) and `jq -s` still
  gathers everything.
* `console()` gives tables a width when the output is a pipe (rich's 80 columns
  would fold every row), and `target_column` keeps a task's target on one line:
  it is an identifier, and a target broken mid-word cannot be searched for or
  copied back into a command. Every other column is a `text_column`: it wraps
  between words only, being at least as wide as its longest word, so a date or a
  duration is never cut in two on a narrow terminal.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, Literal, TypeVar

import click
from rich.console import Console
from rich.table import Table

#: Columns for a pipe or a CI log, which have no width of their own.
PIPE_WIDTH = 160

Command = TypeVar("Command", bound=Callable[..., Any])


def json_option(command: Command) -> Command:
    """Add `--json`; the command receives `as_json`."""
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        help="Print JSON Lines (one object per row, stable keys) instead of a table.",
    )(command)


def echo_json_lines(rows: Iterable[Mapping[str, object]]) -> None:
    """Print each row as one compact JSON object on its own line."""
    for row in rows:
        click.echo(json.dumps(row, default=_jsonable, ensure_ascii=False, sort_keys=False))


def iso(instant: datetime | None) -> str | None:
    """An instant as ISO 8601 with its offset (UTC instants end in `+00:00`), or None."""
    return None if instant is None else instant.isoformat()


def console() -> Console:
    """A console for tables: the terminal's width, or `PIPE_WIDTH` when piped."""
    made = Console()
    if not made.is_terminal and "COLUMNS" not in os.environ:
        made.width = PIPE_WIDTH
    return made


def target_column(table: Table, header: str, targets: Iterable[str]) -> None:
    """Add a column that never wraps its values: as wide as the longest target.

    Other columns fold instead; a table wider than the console scrolls rather than
    breaking an identifier in two.
    """
    widest = max((len(target) for target in targets), default=len(header))
    table.add_column(header, no_wrap=True, min_width=max(widest, len(header)))


#: The widest a free-text column's longest word makes it (an error's URL, say): a word
#: longer than that is folded rather than widening the table past any terminal.
LONGEST_WORD = 40


def text_column(
    table: Table,
    header: str,
    values: Iterable[str],
    *,
    justify: Literal["left", "right"] = "left",
    longest_word: int | None = None,
) -> None:
    """Add a column that wraps between words only: as wide as its longest word at least.

    `values` are the column's cells as plain text (markup removed); `longest_word`
    caps that width for free text, whose rare long word is then folded.
    """
    words = [word for value in values for word in value.split()] + header.split()
    widest = max((len(word) for word in words), default=1)
    if longest_word is not None:
        widest = min(widest, longest_word)
    table.add_column(header, min_width=widest, overflow="fold", justify=justify)


#: The narrowest a folding column is given when a table must widen past the console.
_FOLDING_COLUMN_WIDTH = 12


def print_table(console: Console, table: Table) -> None:
    """Print `table`, wider than the console when its unbreakable columns need it.

    rich crops a row that does not fit; a target column (`target_column`) must never
    be cut, so the table is laid out at the width it needs and the terminal wraps or
    scrolls the line instead.
    """
    needed = 1 + sum(3 + (column.min_width or _FOLDING_COLUMN_WIDTH) for column in table.columns)
    console.print(table, width=max(console.width, needed), crop=False)


def _jsonable(value: object) -> object:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable: {value!r}")
