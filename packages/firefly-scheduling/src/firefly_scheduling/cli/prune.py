"""`firefly-scheduling prune`: close died runs and delete old records of the run history.

1. A record still `running` that started longer ago than `--stale` (default 24 h)
   belongs to a run whose node died without anyone adopting it: it is closed as
   `expired`. (The fire runner already does this, sooner, whenever the task fires
   again; this catches tasks that never fire again.) Set `--stale` above your
   longest run: a live run closed here would have its own result refused.
2. Finished and skipped records of fires older than `--days` are deleted. Running
   records are never deleted, and neither is any record of a fire younger than
   grace + clock skew, whatever `--days` says: until then a node may still run or
   adopt that fire, and its record is what tells that node the fire is done.
   (A deleted record would let a node waking late, within grace, run it again.)
   The horizon uses this machine's clock, which, like every node's, must be within
   `clock_skew` of the others.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import click

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.history import HistoryError, require_history
from firefly_scheduling.schedule.durations import format_duration, parse_duration
from firefly_scheduling.settings import Settings

#: The longest `--days` accepted (100 years): beyond it a cutoff leaves the calendar.
MAX_DAYS = 36_525.0


def _days(value: str) -> float:
    """`--days` as a finite, non-negative number of days; `ConfigurationError` otherwise."""
    try:
        days = float(value)
    except ValueError:
        days = math.nan
    if not (math.isfinite(days) and 0 <= days <= MAX_DAYS):
        raise ConfigurationError(
            f"prune --days: {value!r} is not a number of days from 0 to {MAX_DAYS:g} "
            f"(e.g. --days 30, or --days 0.5 for 12 hours)"
        )
    return days


@click.command()
@click.option(
    "--days",
    "days_text",
    required=True,
    metavar="DAYS",
    help=(
        "Delete finished and skipped records of fires older than this many days "
        "(never those within grace + clock skew)."
    ),
)
@click.option(
    "--stale",
    default="24h",
    show_default=True,
    help="Close as expired the runs still 'running' that started longer ago than this.",
)
def prune(days_text: str, stale: str) -> None:
    """Close died runs as expired and delete old records; never running ones."""
    days = _days(days_text)
    stale_seconds = parse_duration(stale, source="--stale")
    settings = Settings.from_env()
    horizon = settings.grace + settings.clock_skew
    history = require_history(settings)
    now = datetime.now(UTC)
    cutoff = now - max(timedelta(days=days), timedelta(seconds=horizon))
    try:
        expired = history.expire_dead(now - timedelta(seconds=stale_seconds), at=now)
        deleted = history.prune(cutoff)
    except HistoryError as err:
        raise click.ClickException(str(err)) from err
    finally:
        history.close()
    kept = (
        f"; kept every fire within grace + clock skew ({format_duration(horizon)})"
        if timedelta(days=days) < timedelta(seconds=horizon)
        else ""
    )
    click.echo(
        f"closed {expired} died run(s) as expired (running for over "
        f"{format_duration(stale_seconds)}); deleted {deleted} record(s) of fires older than "
        f"{days:g} day(s){kept}"
    )
