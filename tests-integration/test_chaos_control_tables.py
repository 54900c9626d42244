"""Two chaos setups on one SQL server steer apart: each run's control store is a table
of its own (`chaos_harness.control_store`), so a node of one setup never takes the
other's trigger, drives its backfill, or lifts its pause; the table is dropped after."""

from __future__ import annotations

import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chaos_harness.control_store import drop_run_table, run_control_store, table_name
from chaos_harness.steering_nemesis import STEERED
from firefly_scheduling.settings import Settings
from firefly_scheduling_database.engine import release_store_engine, store_engine

START = datetime(2030, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("provider", "server"), [("postgres", "postgres_url"), ("mysql", "mysql_url")]
)
def test_two_runs_on_one_server_see_none_of_each_others_requests(
    provider: str, server: str, request: pytest.FixtureRequest
) -> None:
    url: str = request.getfixturevalue(server)
    settings = Settings(lock_provider=provider, lock_urls={provider: url})
    first, second = (f"chaos-{uuid.uuid4().hex[:12]}" for _ in range(2))
    one, other = run_control_store(settings, first), run_control_store(settings, second)
    try:
        one.pause(STEERED, by="chaos-operator")
        trigger = one.request_trigger(STEERED, by="chaos-operator")
        one.request_backfill(STEERED, START, START + timedelta(seconds=3), by="chaos-operator")
        assert (other.pauses(), other.triggers(), other.backfills()) == ([], [], [])
        assert other.take_trigger(STEERED) is None
        assert not other.resume(STEERED, by="chaos-operator")
        assert one.pause_of(STEERED) is not None
        assert one.take_trigger(STEERED) == trigger
    finally:
        one.close()
        other.close()
        drop_run_table(settings, first)
        drop_run_table(settings, second)
    engine = store_engine(url)
    try:
        tables = set(sa.inspect(engine).get_table_names())
    finally:
        release_store_engine(engine)
    assert {table_name(first), table_name(second)}.isdisjoint(tables)
