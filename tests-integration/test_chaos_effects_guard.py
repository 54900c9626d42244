"""The effects tasks' guarded attempt on a real SQLite file, against a second connection.

Rule 6 judges each attempt's outcome against the token it recorded as found, so no
newer write may come between that read and the attempt's `fenced_update`. SQLite has
no `FOR UPDATE`, and its driver begins a transaction only at the first write: a read
that is not under the write lock let a newer holder write in between, and the
attempt, refused, recorded the older token it had read (seed 646721, effects-sqlite).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Engine

from chaos_harness.body_runs import CheckReport
from chaos_harness.effects_guard import Attempt, guarded_attempt
from chaos_harness.effects_rules import EffectsState, GuardedWrite, check_guarded_writes
from chaos_harness.effects_tables import tables, task_engine
from chaos_harness.history import key_of, parse_instant

PREFIX = "chaos-guard"
ROW = "chaos-guard-effect-a"
INSTANT = "2026-12-07T13:49:49.500000+00:00"


@pytest.fixture
def database(tmp_path: Path) -> Iterator[tuple[str, Engine]]:
    """The run's file, in WAL mode as the run history leaves it, the row at token 241."""
    path = tmp_path / "effects.db"
    with closing(sqlite3.connect(path)) as setup:
        setup.execute("PRAGMA journal_mode=WAL")
    url = f"sqlite:///{path}"
    metadata, _, guarded, _ = tables(PREFIX)
    engine = task_engine(url)
    metadata.create_all(engine)
    with engine.begin() as connection:
        connection.execute(sa.insert(guarded).values(name=ROW, fence_token=241))
    try:
        yield url, engine
    finally:
        engine.dispose()


def _attempt(token: int, attempt: int) -> Attempt:
    return Attempt(ROW, "app:effect_a", INSTANT, attempt, token, f"token {token}")


def _state(url: str) -> EffectsState:
    """The committed attempts and the row, read by a third, plain connection."""
    _, _, guarded, writes = tables(PREFIX)
    path = url.removeprefix("sqlite:///")
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as reader:
        rows = reader.execute(
            f"SELECT name, task, instant, attempt, token, previous, written FROM {writes.name}"
            " ORDER BY id"
        ).fetchall()
        stored = dict(reader.execute(f"SELECT name, fence_token FROM {guarded.name}").fetchall())
    attempts = [
        GuardedWrite(name, key_of(task, parse_instant(at)), n, token, previous, bool(written))
        for name, task, at, n, token, previous, written in rows
    ]
    return EffectsState(writes=attempts, guarded=stored)


def test_no_newer_write_comes_between_an_attempts_read_and_its_write(
    database: tuple[str, Engine],
) -> None:
    """A newer holder (token 243) tries its own attempt on another connection the moment
    the older one (242) has read the row and sends its `fenced_update`: it must wait for
    the older attempt's commit (here it gives up, locked out), so the older attempt's
    record holds the token its write was judged against."""
    url, engine = database
    _, _, guarded, writes = tables(PREFIX)
    newer = task_engine(url, bound=1)
    interleaved: list[str] = []

    def newer_holder_tries_first(connection: Any, cursor: Any, statement: str, *rest: Any) -> None:
        if interleaved or not statement.lstrip().upper().startswith("UPDATE"):
            return
        try:
            guarded_attempt(newer, guarded, writes, _attempt(243, 1))
        except sa.exc.OperationalError as err:
            interleaved.append("locked out" if "database is locked" in str(err) else repr(err))
        else:
            interleaved.append("written")

    event.listen(engine, "before_cursor_execute", newer_holder_tries_first)
    try:
        guarded_attempt(engine, guarded, writes, _attempt(242, 2))
    finally:
        event.remove(engine, "before_cursor_execute", newer_holder_tries_first)
        newer.dispose()
    report = CheckReport()
    check_guarded_writes(_state(url), report)
    assert [v.message for v in report.violations] == [], interleaved
    assert interleaved == ["locked out"]
