"""A setup's own control store: a table of its own run on a shared SQL server.

The SQL setups share their servers (`postgres` and `database-postgres` one
PostgreSQL, `mysql` and `database-mariadb` one MariaDB), and every setup steers the
same task (`steering_nemesis.STEERED`). In the store's default table, the nodes of one
setup took the other's triggers and ran them against their own history (the other's
had no record of them), drove its backfills, found every instant run in their own
history and removed the requests, and lifted its pauses. So the nodes, the operator
and the checker of one run use a table named after the run's prefix
(`FIREFLY_CHAOS_PREFIX`), as its lock names are, dropped once the run is checked. The
private servers (Redis, etcd) keep the store as configured.
"""

from __future__ import annotations

from firefly_scheduling.control.selection import control_store_url, resolve_control_store
from firefly_scheduling.control.store import ControlStore
from firefly_scheduling.settings import Settings

#: The URL schemes of the SQL control store (`firefly_scheduling_database`).
SQL_SCHEMES = ("postgresql", "mysql", "mariadb", "sqlite")


def table_name(prefix: str) -> str:
    """The control table of the run whose lock names start with `prefix`."""
    return "firefly_" + prefix.replace("-", "_")


def is_sql(url: str) -> bool:
    return url.partition(":")[0].partition("+")[0] in SQL_SCHEMES


def run_control_store(settings: Settings, prefix: str) -> ControlStore:
    """The control store of the run of `prefix`: its own table on a SQL server."""
    url = control_store_url(settings)
    if not is_sql(url):
        return resolve_control_store(settings)
    from firefly_scheduling_database.control_store import (  # noqa: PLC0415 - optional
        DatabaseControlStore,
    )

    return DatabaseControlStore(url, table=table_name(prefix))


def drop_run_table(settings: Settings, prefix: str) -> None:
    """Drop the run's own control table (only a SQL store has one)."""
    url = control_store_url(settings)
    if not is_sql(url):
        return
    from firefly_scheduling_database.control_table import control_table  # noqa: PLC0415
    from firefly_scheduling_database.engine import (  # noqa: PLC0415
        release_store_engine,
        store_engine,
    )

    engine = store_engine(url)
    try:
        control_table(table_name(prefix)).drop(engine, checkfirst=True)
    finally:
        release_store_engine(engine)
