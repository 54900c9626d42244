"""The `effects` setups' application tables: their shape, names, and the task's engine.

Three tables per run, named after the run's prefix (the SQL servers are shared):

* `<prefix>_effects`: one row per committed body of a fire, written inside
  `current_fire().atomic(...)`. No unique key on purpose: a fire whose effect
  committed twice shows as two rows, never as a refused insert.
* `<prefix>_guarded`: one row per task lock, written only through `fenced_update`;
  `fence_token` is the token of the last write that took.
* `<prefix>_guarded_writes`: append-only, one row per guarded write attempt, inserted
  in the attempt's own transaction (so exactly the committed attempts remain), with
  the token it carried, the token the row held when it was tried (read under the
  row's lock) and whether `fenced_update` wrote.
"""

from __future__ import annotations

import re
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine, make_url

#: The SQLAlchemy driver of the task's own engine, by the URL's backend.
_DRIVERS = {"postgresql": "postgresql+psycopg", "mysql": "mysql+pymysql", "sqlite": "sqlite"}
#: Every statement, connect and row-lock wait of the task's engine is bounded: a
#: stalled proxy or a paused holder fails the body, never hangs the node.
_BOUND_SECONDS = 5


def table_prefix(run_prefix: str) -> str:
    """`chaos-1a2b…` as a plain SQL identifier prefix (`chaos_1a2b…`)."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", run_prefix)
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,40}", name):
        raise ValueError(f"chaos: run prefix {run_prefix!r} makes no table name")
    return name


def tables(run_prefix: str) -> tuple[sa.MetaData, sa.Table, sa.Table, sa.Table]:
    """The metadata and the three tables (effects, guarded, guarded writes) of a run."""
    prefix = table_prefix(run_prefix)
    metadata = sa.MetaData()
    effects = sa.Table(
        f"{prefix}_effects",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("task", sa.String(200), nullable=False),
        sa.Column("instant", sa.String(40), nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("token", sa.BigInteger, nullable=True),
        sa.Column("node", sa.String(100), nullable=False),
    )
    guarded = sa.Table(
        f"{prefix}_guarded",
        metadata,
        sa.Column("name", sa.String(200), primary_key=True),
        sa.Column("value", sa.String(300), nullable=True),
        sa.Column("fence_token", sa.BigInteger, nullable=True),
    )
    writes = sa.Table(
        f"{prefix}_guarded_writes",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("task", sa.String(200), nullable=False),
        sa.Column("instant", sa.String(40), nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("token", sa.BigInteger, nullable=False),
        sa.Column("previous", sa.BigInteger, nullable=True),
        sa.Column("written", sa.Boolean, nullable=False),
    )
    return metadata, effects, guarded, writes


def task_engine(url: str, *, bound: int = _BOUND_SECONDS) -> Engine:
    """An engine on `url` with the driver a task uses, every wait bounded by `bound` seconds."""
    if bound < 1:
        raise ValueError(
            f"chaos: a task engine's bound is at least 1 s (0 is none on a server), got {bound}"
        )
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    parsed = parsed.set(drivername=_DRIVERS[backend])
    if backend == "postgresql":
        options = f"-c statement_timeout={bound * 1000} -c lock_timeout={bound * 1000}"
        connect_args: dict[str, object] = {"connect_timeout": bound, "options": options}
    elif backend == "mysql":
        connect_args = {
            "connect_timeout": bound,
            "read_timeout": bound,
            "write_timeout": bound,
            "init_command": f"SET SESSION innodb_lock_wait_timeout = {bound}",
        }
    else:
        connect_args = {"timeout": bound}
    engine = sa.create_engine(parsed, connect_args=connect_args, pool_pre_ping=True)
    if backend == "sqlite":
        _begin_immediate(engine)
    return engine


def _begin_immediate(engine: Engine) -> None:
    """SQLite: every transaction takes the file's write lock at its `BEGIN`.

    SQLite has no `SELECT … FOR UPDATE` (SQLAlchemy drops the clause), and its
    driver begins a transaction only at the first write, so a guarded attempt's read
    ran outside it: a newer holder could write between that read and the attempt's
    `fenced_update`, and the attempt recorded a token older than the one it was
    refused by. `BEGIN IMMEDIATE` makes the read wait for, and then hold, the lock.
    """

    @event.listens_for(engine, "connect")
    def _driver_begins_nothing(driver_connection: Any, _record: Any) -> None:
        driver_connection.isolation_level = None

    @event.listens_for(engine, "begin")
    def _begin(connection: Connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")
