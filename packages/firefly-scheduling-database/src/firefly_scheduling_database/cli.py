"""`firefly-scheduling migrate`: create every table of the database backend.

Exposed as the click command `migrate`; the core CLI group picks it up through the
`firefly_scheduling.cli_commands` entry point. It creates, in one database:

* the lease table and its fence table (`DatabaseLeaseLock.install`), which the lock
  never creates by itself;
* the initial-delay anchors table (`DatabaseAnchorStore.install`);
* the run-history table (`DatabaseRunHistory.install`).

The last two are also created on first use, but only where the application's role
may run `CREATE TABLE`; `migrate` lets a deployment create all of them ahead of time
with a privileged role. Every statement is `CREATE TABLE IF NOT EXISTS`, so it is
safe to run again, and on several nodes at once.

Exit status: 0 when every table is ready, 1 when the database refused (unreachable,
no privilege), 2 for a configuration error (no URL, a malformed one), as in every
`firefly-scheduling` command.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import click

from firefly_scheduling.cli.common import ConfigurationFailure
from firefly_scheduling.errors import ConfigurationError, FireflySchedulingError
from firefly_scheduling.settings import Settings
from firefly_scheduling_database.anchor_store import TABLE_NAME as ANCHORS_TABLE
from firefly_scheduling_database.anchor_store import DatabaseAnchorStore
from firefly_scheduling_database.engine import describe_url
from firefly_scheduling_database.history_store import DEFAULT_TABLE as RUNS_TABLE
from firefly_scheduling_database.history_store import DatabaseRunHistory
from firefly_scheduling_database.lease_lock import DatabaseLeaseLock
from firefly_scheduling_database.schema import DEFAULT_TABLE, FENCES_SUFFIX


@click.command("migrate")
@click.option(
    "--url",
    default=None,
    help="SQLAlchemy URL [default: FIREFLY_SCHEDULING_LOCK_DATABASE_URL, then DATABASE_URL]",
)
@click.option("--table", default=DEFAULT_TABLE, show_default=True, help="Lease table name.")
def migrate(url: str | None, table: str) -> None:
    """Create the database backend's tables if absent (safe to run again).

    The lease table and its fences, the initial-delay anchors and the run history.
    """
    try:
        url = url or Settings.from_env().url_for("database")
        _install(lambda: DatabaseLeaseLock(url, table=table))
        _install(lambda: DatabaseAnchorStore(url))
        _install(lambda: DatabaseRunHistory(url))
        where, _ = describe_url(url)
    except ConfigurationError as err:
        raise ConfigurationFailure(str(err)) from err  # exit 2, as in every command
    except FireflySchedulingError as err:
        raise click.ClickException(str(err)) from err
    tables = (table, table + FENCES_SUFFIX, ANCHORS_TABLE, RUNS_TABLE)
    click.echo(f"tables {', '.join(tables[:-1])} and {tables[-1]} are ready in {where}")


class _Installable(Protocol):
    """What `migrate` needs of a store: `install()` and `close()`."""

    def install(self) -> None: ...

    def close(self) -> None: ...


def _install(build: Callable[[], _Installable]) -> None:
    store = build()
    try:
        store.install()
    finally:
        store.close()
