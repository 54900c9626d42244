"""`firefly-scheduling migrate`: create the lease tables of the database backend.

Exposed as the click command `migrate`; the core CLI group picks it up through the
`firefly_scheduling.cli_commands` entry point.
"""

from __future__ import annotations

import click

from firefly_scheduling.errors import ConfigurationError, LockBackendError
from firefly_scheduling.settings import Settings
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
    """Create the database lock backend's tables if absent (safe to run again)."""
    try:
        lock = DatabaseLeaseLock(url or Settings.from_env().url_for("database"), table=table)
        try:
            lock.install()
        finally:
            lock.close()
    except (ConfigurationError, LockBackendError) as err:
        raise click.ClickException(str(err)) from err
    click.echo(f"tables {table} and {table}{FENCES_SUFFIX} are ready: {lock!r}")
