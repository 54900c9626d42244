"""`firefly-scheduling prune`: close died runs and delete old records of the run history.

1. A record still `running` that started longer ago than `--stale` (default 24 h)
   belongs to a run whose node died without anyone adopting it: it is closed as
   `expired`. (The fire runner already does this, sooner, whenever the task fires
   again; this catches tasks that never fire again.) Set `--stale` above your
   longest run: a live run closed here would have its own result refused.
2. Finished and skipped records of fires older than `--days` are deleted. Running
   records are never deleted.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import click

from firefly_scheduling.durations import format_duration, parse_duration
from firefly_scheduling.history import HistoryError, require_history


@click.command()
@click.option(
    "--days",
    type=click.FloatRange(min=0),
    required=True,
    help="Delete finished and skipped records of fires older than this many days.",
)
@click.option(
    "--stale",
    default="24h",
    show_default=True,
    help="Close as expired the runs still 'running' that started longer ago than this.",
)
def prune(days: float, stale: str) -> None:
    """Close died runs as expired and delete old records; never running ones."""
    stale_seconds = parse_duration(stale, source="--stale")
    history = require_history()
    now = datetime.now(UTC)
    try:
        expired = history.expire_dead(now - timedelta(seconds=stale_seconds), at=now)
        deleted = history.prune(now - timedelta(days=days))
    except HistoryError as err:
        raise click.ClickException(str(err)) from err
    finally:
        history.close()
    click.echo(
        f"closed {expired} died run(s) as expired (running for over "
        f"{format_duration(stale_seconds)}); deleted {deleted} record(s) of fires older than "
        f"{days:g} day(s)"
    )
