"""The `effects` setups around a run: their tables, their nodes' variables, and reading
back what the run left, with a second client.

`effects-postgres`, `effects-mysql` and `effects-sqlite` keep the task lock (a lease
table), the run history and the application tables in one database, as a task using
`current_fire().atomic(...)` must (on SQLite the lock has a file of its own, so its
renewals never wait for an open block). On the SQL servers each node reaches all three
through its own proxy, so a stall or a reset hits the task's transaction as it hits
the lock and the history. Afterwards the tables and the history's records of this
run are read with the plain driver (psycopg, PyMySQL, sqlite3), never through the
library or SQLAlchemy, saved beside the evidence (`effects.json`, for `--recheck`)
and dropped from the shared server.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pymysql
import sqlalchemy as sa

from chaos_harness.body_runs import CheckReport
from chaos_harness.effects_rules import (
    EffectsState,
    GuardedWrite,
    check_effect_once,
    check_guarded_writes,
)
from chaos_harness.effects_tables import table_prefix, tables, task_engine
from chaos_harness.effects_tasks import RATES, lock_of, schedules
from chaos_harness.history import TABLE, HistoryKey, HistoryRow, key_of, parse_instant

EFFECTS_APP = "chaos_harness.effects_tasks"

EFFECTS_SETUPS = ("effects-postgres", "effects-mysql", "effects-sqlite")
#: The longest linger inside an open block, by setup (`effects_tasks.DWELL`): SQLite's
#: one writer waits for every open block, so its blocks are kept short.
DWELL_SECONDS = {"effects-sqlite": "0.08"}
SAVED = "effects.json"


def check_effects(
    state: EffectsState, history: dict[HistoryKey, HistoryRow], report: CheckReport
) -> dict[str, int]:
    """Rules 5 and 6 on what the run left; the counts the results table shows."""
    check_effect_once(state, history, set(schedules(1.0)), report)
    check_guarded_writes(state, report)
    written = sum(1 for write in state.writes if write.written)
    return {
        "effect rows": len(state.effects),
        "guarded writes": written,
        "guarded refusals": len(state.writes) - written,
    }


def prepare(url: str, run_prefix: str) -> None:
    """Create this run's tables, with one guarded row per task lock, no token yet."""
    metadata, _, guarded, _ = tables(run_prefix)
    engine = task_engine(url)
    try:
        metadata.create_all(engine)
        names = [lock_of(run_prefix, name) for name in RATES]
        with engine.begin() as connection:
            connection.execute(sa.insert(guarded), [{"name": name} for name in names])
    finally:
        engine.dispose()


def node_variables(setup: str, url: str) -> dict[str, str]:
    """What a node of `setup` needs besides the lock URL: its history and its tables,
    at `url` (the node's proxy)."""
    variables = {
        "FIREFLY_CHAOS_APP": EFFECTS_APP,
        "FIREFLY_CHAOS_EFFECTS_URL": url,
        "FIREFLY_SCHEDULING_HISTORY_URL": url,
    }
    if setup in DWELL_SECONDS:
        variables["FIREFLY_CHAOS_EFFECTS_DWELL"] = DWELL_SECONDS[setup]
    return variables


def collect(
    url: str, run_prefix: str, workdir: Path
) -> tuple[dict[HistoryKey, HistoryRow], EffectsState]:
    """Read this run's history records and tables with a second client, save, drop."""
    prefix = table_prefix(run_prefix)
    names = [f"{prefix}_{kind}" for kind in ("effects", "guarded", "guarded_writes")]
    with _reader(url) as read:
        history_rows = read(
            f"SELECT task, instant, lock_name, state, attempt, node, token, error FROM {TABLE} "
            "WHERE lock_name LIKE %s",
            (f"{run_prefix}-%",),
        )
        effects = read(f"SELECT task, instant FROM {names[0]}", ())
        guarded = read(f"SELECT name, fence_token FROM {names[1]}", ())
        writes = read(
            f"SELECT name, task, instant, attempt, token, previous, written FROM {names[2]} "
            "ORDER BY id",
            (),
        )
    saved = {
        "history": [_plain(row) for row in history_rows],
        "effects": [_plain(row) for row in effects],
        "guarded": [_plain(row) for row in guarded],
        "writes": [_plain(row) for row in writes],
    }
    (workdir / SAVED).write_text(json.dumps(saved, indent=0))
    _drop(url, run_prefix)
    return load(workdir)


def load(workdir: Path) -> tuple[dict[HistoryKey, HistoryRow], EffectsState]:
    """The history and the tables a finished run saved (`collect`)."""
    saved = json.loads((workdir / SAVED).read_text())
    history = {}
    for task, instant, lock, state, attempt, node, token, error in saved["history"]:
        key = key_of(task, parse_instant(instant))
        history[key] = HistoryRow(key, lock, state, int(attempt), node, token, error)
    effects = [key_of(task, parse_instant(instant)) for task, instant in saved["effects"]]
    writes = [
        GuardedWrite(
            name,
            key_of(task, parse_instant(instant)),
            int(attempt),
            int(token),
            previous,
            bool(written),
        )
        for name, task, instant, attempt, token, previous, written in saved["writes"]
    ]
    return history, EffectsState(effects, writes, dict(saved["guarded"]))


def _plain(row: Sequence[Any]) -> list[Any]:
    """A row as JSON holds it: bytes (MySQL's binary lock names) decoded, times as text."""
    return [
        value.decode()
        if isinstance(value, bytes)
        else value
        if value is None or isinstance(value, int | str)
        else str(value)
        for value in row
    ]


@contextmanager
def _reader(url: str) -> Iterator[Any]:
    """`read(sql, parameters) -> rows` on the plain driver of `url` (`%s` placeholders)."""
    parts = urlsplit(url)
    if parts.scheme.startswith("postgres"):
        with psycopg.connect(url, autocommit=True) as postgres:
            yield lambda sql, parameters: postgres.execute(sql, parameters).fetchall()
    elif parts.scheme.startswith("mysql"):
        connection = pymysql.connect(
            host=parts.hostname or "127.0.0.1",
            port=parts.port or 3306,
            user=parts.username or "root",
            password=parts.password or "",
            database=parts.path.lstrip("/"),
            autocommit=True,
        )
        with closing(connection), connection.cursor() as cursor:

            def read(sql: str, parameters: tuple[object, ...]) -> list[Any]:
                cursor.execute(sql, parameters)
                return list(cursor.fetchall())

            yield read
    else:
        path = url.removeprefix("sqlite:///")
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)) as lite:

            def read_file(sql: str, parameters: tuple[object, ...]) -> list[Any]:
                return lite.execute(sql.replace("%s", "?"), parameters).fetchall()

            yield read_file


def _drop(url: str, run_prefix: str) -> None:
    if url.startswith("sqlite"):
        return  # the file goes with the run's directory
    metadata, *_ = tables(run_prefix)
    engine = task_engine(url)
    try:
        metadata.drop_all(engine)
    finally:
        engine.dispose()
