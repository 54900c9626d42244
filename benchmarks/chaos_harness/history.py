"""The run history as a second client reads it: plain `sqlite3`, not the library's store.

A chaos run keeps its history in a private SQLite file, so the checker can read
every record with a driver the code under test never touches. Records are keyed by
`HistoryKey`, built in one place (`key_of`): when the history is keyed by
(lock name, target) the key grows a field here and nowhere else. A `lock_name`
column is read when the table has one.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

TABLE = "firefly_scheduling_runs"


@dataclass(frozen=True)
class HistoryKey:
    """Which fire a record is about."""

    target: str
    instant: datetime


@dataclass(frozen=True)
class HistoryRow:
    key: HistoryKey
    lock_name: str | None
    state: str
    attempt: int
    node: str
    token: int | None
    error: str | None


def key_of(target: str, instant: datetime) -> HistoryKey:
    return HistoryKey(target, instant.astimezone(UTC))


def parse_instant(text: str) -> datetime:
    """An instant as the evidence or the history writes it, aware UTC."""
    value = datetime.fromisoformat(text)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def read_history(path: Path) -> dict[HistoryKey, HistoryRow]:
    """Every record of the SQLite history at `path` (read-only)."""
    if not path.exists():
        return {}
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        connection.row_factory = sqlite3.Row
        columns = {row[1] for row in connection.execute(f"PRAGMA table_info({TABLE})")}
        if not columns:
            return {}
        rows = connection.execute(f"SELECT * FROM {TABLE}").fetchall()
    finally:
        connection.close()
    found: dict[HistoryKey, HistoryRow] = {}
    for row in rows:
        key = key_of(row["task"], parse_instant(str(row["instant"])))
        found[key] = HistoryRow(
            key=key,
            lock_name=row["lock_name"] if "lock_name" in columns else None,
            state=row["state"],
            attempt=int(row["attempt"]),
            node=row["node"],
            token=row["token"],
            error=row["error"],
        )
    return found
