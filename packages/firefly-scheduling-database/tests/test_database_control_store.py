"""`DatabaseControlStore` on SQLite: the node's connection budget, the table name, close."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling_database.control_reads import ControlReads
from firefly_scheduling_database.control_store import DatabaseControlStore
from firefly_scheduling_database.control_store_async import AsyncDatabaseControlStore


def test_a_url_naming_the_connection_budget_is_accepted_by_both_flavours(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'budget.db'}?max_connections=8"
    store = DatabaseControlStore(url)
    try:
        store.pause("app.jobs:a", by="alice")
    finally:
        store.close()
        store.close()  # twice is safe

    async def read() -> object:
        reader = AsyncDatabaseControlStore(url)
        try:
            return await reader.pause_of("app.jobs:a")
        finally:
            await reader.aclose()

    assert asyncio.run(read()) is not None


def test_a_table_name_that_is_no_identifier_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="table name"):
        DatabaseControlStore(f"sqlite:///{tmp_path / 'x.db'}", table="control; DROP TABLE x")


def test_the_sync_store_reads_on_the_driver_on_postgresql_alone(tmp_path: Path) -> None:
    """The change mark's and the pauses' reads skip SQLAlchemy's execution layer on
    PostgreSQL (`control_reads`); SQLite and the asyncio store keep it. Building a
    store connects to nothing."""
    postgres = DatabaseControlStore("postgresql://app@127.0.0.1:9/app")
    sqlite = DatabaseControlStore(f"sqlite:///{tmp_path / 'reads.db'}")
    try:
        assert isinstance(postgres._reads, ControlReads)
        assert sqlite._reads is None
        sqlite.pause("app.jobs:a", by="alice")
        assert [pause.task for pause in sqlite.pauses()] == ["app.jobs:a"]
        assert sqlite.change_mark() is not None
    finally:
        postgres.close()
        sqlite.close()
