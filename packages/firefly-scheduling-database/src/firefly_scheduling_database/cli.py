"""`firefly-scheduling migrate`: create every table of the database backend.

Exposed as the click command `migrate`; the core CLI group picks it up through the
`firefly_scheduling.cli_commands` entry point. It creates, in one database:

* the lease table and its fence table (`DatabaseLeaseLock.install`), which the lock
  never creates by itself;
* the initial-delay anchors table (`DatabaseAnchorStore.install`);
* the run-history table (`SqlRunHistory.install`);
* the control store's table (`DatabaseControlStore.install`).

The last three are also created on first use, but only where the application's role
may run `CREATE TABLE`; `migrate` lets a deployment create all of them ahead of time
with a privileged role. Every statement is `CREATE TABLE IF NOT EXISTS`, so it is
safe to run again, and on several nodes at once.

Exit status: 0 when every table is ready, 1 when the database refused (unreachable,
no privilege), 2 for a configuration error (no URL, a malformed one), as in every
`firefly-scheduling` command.

It also upgrades a 0.1.0 run-history table (keyed by target alone) to 0.2.0's key,
`(lock_name, task, instant)` (`sql_history.migration`), which nodes refuse to use before.
`migrate --history` does only that: creates or upgrades the run-history table, for
deployments whose history lives on the PostgreSQL or MySQL server of the `postgres`
or `mysql` lock provider (no lease tables there). Run it with one node, before
starting the new version; running it again changes nothing.

Without `--url`, the URL is the configured lock provider's: under the `postgres` or
`mysql` provider (any provider whose descriptor keeps its stores at its URL), the
tables of those stores are created there, the anchors and the run history, and no
lease table, which that provider does not use; under any other, the `database`
provider's URL.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import click
from sqlalchemy.exc import SQLAlchemyError

from firefly_scheduling.cli.common import ConfigurationFailure
from firefly_scheduling.errors import ConfigurationError, FireflySchedulingError
from firefly_scheduling.history import HistoryError
from firefly_scheduling.history.selection import HISTORY_KEY, history_url
from firefly_scheduling.providers import LockProvider
from firefly_scheduling.providers.building import registered_provider, store_url_advice
from firefly_scheduling.settings import Settings, env_var
from firefly_scheduling.urls.redaction import scrub
from firefly_scheduling_database.anchor_store import TABLE_NAME as ANCHORS_TABLE
from firefly_scheduling_database.anchor_store import DatabaseAnchorStore
from firefly_scheduling_database.control_store import DatabaseControlStore
from firefly_scheduling_database.control_table import DEFAULT_TABLE as CONTROL_TABLE
from firefly_scheduling_database.lock import DatabaseLeaseLock
from firefly_scheduling_database.provider import PROVIDER
from firefly_scheduling_database.schema import DEFAULT_TABLE, FENCES_SUFFIX, QUEUE_SUFFIX
from firefly_scheduling_database.sql_history.migration import upgrade_history_table
from firefly_scheduling_database.sql_history.store import DEFAULT_TABLE as RUNS_TABLE
from firefly_scheduling_database.sql_history.store import SqlRunHistory
from firefly_scheduling_database.url import describe_url


@click.command("migrate")
@click.option(
    "--url",
    default=None,
    help="SQLAlchemy URL [default: FIREFLY_SCHEDULING_LOCK_DATABASE_URL, then DATABASE_URL]",
)
@click.option("--table", default=DEFAULT_TABLE, show_default=True, help="Lease table name.")
@click.option(
    "--history",
    "history_only",
    is_flag=True,
    help="Only create or upgrade the run-history table (URL default: the history URL).",
)
def migrate(url: str | None, table: str, history_only: bool) -> None:
    """Create the database backend's tables if absent, upgrade old ones (safe to run again).

    The lease table, its fences and its waiters' queue, the initial-delay anchors and
    the run history (an older history table is upgraded to the (lock_name, task,
    instant) key and given its trigger_kind column).
    """
    try:
        if history_only:
            url = url or _history_url()
            done = _upgrade_history(url)
            where, _ = describe_url(url)
            click.echo(f"run-history table {RUNS_TABLE} {done} in {where}")
            return
        settings = Settings.from_env()
        keeper = None if url else _store_keeper(settings)
        if keeper is not None:
            _migrate_stores_of(keeper, settings)
            return
        url = url or settings.url_for("database")
        _install(lambda: DatabaseLeaseLock(url, table=table))
        _install(lambda: DatabaseAnchorStore(url))
        _install(lambda: DatabaseControlStore(url))
        done = _upgrade_history(url)
        where, _ = describe_url(url)
    except ConfigurationError as err:
        raise ConfigurationFailure(str(err)) from err  # exit 2, as in every command
    except FireflySchedulingError as err:
        raise click.ClickException(str(err)) from err
    lease_tables = (table, table + FENCES_SUFFIX, table + QUEUE_SUFFIX)
    tables = (*lease_tables, ANCHORS_TABLE, CONTROL_TABLE, RUNS_TABLE)
    click.echo(f"tables {', '.join(tables[:-1])} and {tables[-1]} are ready in {where}")
    if done == "upgraded":
        click.echo(
            f"run-history table {RUNS_TABLE} upgraded to the (lock_name, task, instant) key "
            "with a trigger_kind column"
        )


def _store_keeper(settings: Settings) -> LockProvider | None:
    """The configured provider when it is another one that keeps its stores at its URL."""
    provider = registered_provider(settings)
    if provider is None or provider.name == PROVIDER.name or not provider.stores_at_lock_url:
        return None
    return provider


def _migrate_stores_of(provider: LockProvider, settings: Settings) -> None:
    """Create the tables `provider` keeps at its URL through this package's stores."""
    url = settings.url_for(provider)
    source = settings.url_source(provider)
    try:
        if "anchor_store" in provider.stores_at_lock_url:
            _install(lambda: DatabaseAnchorStore(url))
        if "control_store" in provider.stores_at_lock_url:
            _install(lambda: DatabaseControlStore(url))
        done = _upgrade_history(url) if "history_store" in provider.stores_at_lock_url else None
    except ConfigurationError as err:
        raise ConfigurationError(
            f"{err} (the URL of the {provider.name!r} lock provider, from {source})"
            f"{store_url_advice(url, settings)}"
        ) from err
    where, _ = describe_url(url)
    tables = [
        name
        for slot, name in (
            ("anchor_store", ANCHORS_TABLE),
            ("control_store", CONTROL_TABLE),
            ("history_store", RUNS_TABLE),
        )
        if slot in provider.stores_at_lock_url
    ]
    click.echo(
        f"tables {', '.join(tables[:-1])} and {tables[-1]} are ready in {where}: the "
        f"{provider.name!r} lock provider keeps its initial-delay anchors, control store and "
        "run history there (it has no lease table)"
    )
    if done == "upgraded":
        click.echo(
            f"run-history table {RUNS_TABLE} upgraded to the (lock_name, task, instant) key "
            "with a trigger_kind column"
        )


def _history_url() -> str:
    """The configured history's URL; a `ConfigurationError` when none is a SQL database."""
    settings = Settings.from_env()
    found = history_url(settings)
    if found is None or found.startswith("memory:"):
        raise ConfigurationError(
            f"migrate --history needs --url or a SQL run history; the configuration has "
            f"{'none' if found is None else 'a memory one'} "
            f"(set {env_var(HISTORY_KEY)} or use the database, postgres or mysql provider)"
        )
    return found


def _upgrade_history(url: str) -> str:
    """Create or upgrade the run-history table at `url`; 'created', 'upgraded' or 'current'."""
    store = SqlRunHistory(url)
    try:
        return upgrade_history_table(store.engine, store.table.name)
    except SQLAlchemyError as err:
        where, secrets = describe_url(url)
        raise HistoryError(
            f"upgrading the run-history table in {where} failed: "
            f"{scrub(str(err), secrets) or type(err).__name__}"
        ) from None
    finally:
        store.close()


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
