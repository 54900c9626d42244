"""Which control store the settings select, what is refused, and what is never shown."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from firefly_scheduling.control import (
    AsyncControlStore,
    ControlRecordError,
    ControlStore,
    control_store_url,
    resolve_async_control_store,
    resolve_control_store,
)
from firefly_scheduling.control.memory import MemoryControlStore
from firefly_scheduling.control.memory_async import AsyncMemoryControlStore
from firefly_scheduling.control.records import decode_backfill, decode_pause, decode_schedule
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.settings import Settings

SECRET = "hunter2-control"


class TestControlStoreUrl:
    @pytest.mark.parametrize(
        ("provider", "url"),
        [
            ("database", "sqlite:///locks.db"),
            ("postgres", "postgresql://h/db"),
            ("mysql", "mysql://h/db"),
            ("redis", "redis://h:6379/0"),
            ("etcd", "etcd://h:2379"),
        ],
    )
    def test_a_durable_lock_backend_keeps_it_at_its_url(self, provider: str, url: str) -> None:
        settings = Settings(lock_provider=provider, lock_urls={provider: url})
        assert control_store_url(settings) == url

    @pytest.mark.parametrize("provider", ["memcached", "none", "memory"])
    def test_no_durable_store_is_refused_naming_the_setting(self, provider: str) -> None:
        settings = Settings(lock_provider=provider)
        for resolve in (control_store_url, resolve_control_store, resolve_async_control_store):
            with pytest.raises(ConfigurationError) as caught:
                resolve(settings)
            message = str(caught.value)
            assert "FIREFLY_SCHEDULING_CONTROL_URL" in message
            assert repr(provider) in message

    def test_the_setting_wins_over_the_lock_backend(self) -> None:
        settings = Settings(lock_provider="memcached", control_url="memory://wins")
        assert isinstance(resolve_control_store(settings), MemoryControlStore)
        assert isinstance(resolve_async_control_store(settings), AsyncMemoryControlStore)

    def test_a_memcached_url_is_refused_as_not_durable_without_the_password(self) -> None:
        settings = Settings(control_url=f"memcached://u:{SECRET}@h:11211")
        with pytest.raises(ConfigurationError) as caught:
            resolve_control_store(settings)
        message = str(caught.value)
        assert "keeps no control store" in message
        assert "FIREFLY_SCHEDULING_CONTROL_URL" in message
        assert SECRET not in message

    def test_an_unknown_scheme_is_refused_without_the_password(self) -> None:
        settings = Settings(control_url=f"cassandra://admin:{SECRET}@db:9042/x")
        with pytest.raises(ConfigurationError) as caught:
            resolve_control_store(settings)
        assert "cassandra" in str(caught.value)
        assert SECRET not in str(caught.value)


class TestControlUrlSetting:
    def test_it_is_read_from_the_environment(self) -> None:
        env = {"FIREFLY_SCHEDULING_CONTROL_URL": " redis://h:6379/3 "}
        assert Settings.from_env(env).control_url == "redis://h:6379/3"

    @pytest.mark.parametrize("value", [f"nourl:{SECRET}", f"user:{SECRET}@host", "://x"])
    def test_a_value_that_is_no_url_is_refused_when_read_without_showing_it(
        self, value: str
    ) -> None:
        with pytest.raises(ConfigurationError) as caught:
            Settings.from_env({"FIREFLY_SCHEDULING_CONTROL_URL": value})
        assert "FIREFLY_SCHEDULING_CONTROL_URL" in str(caught.value)
        assert SECRET not in str(caught.value)

    def test_the_password_is_not_in_the_settings_repr(self) -> None:
        settings = Settings.from_env({"FIREFLY_SCHEDULING_CONTROL_URL": f"redis://:{SECRET}@h/0"})
        assert SECRET not in repr(settings)


class TestMemoryStores:
    def test_one_name_is_one_table_for_both_flavours(self) -> None:
        sync_store: ControlStore = MemoryControlStore("memory://shared-by-flavours")
        sync_store.pause("app.jobs:nightly", by="alice")

        async def read() -> object:
            store: AsyncControlStore = AsyncMemoryControlStore("memory://shared-by-flavours")
            return await store.pause_of("app.jobs:nightly")

        assert asyncio.run(read()) == sync_store.pause_of("app.jobs:nightly")
        assert MemoryControlStore("memory://another").pause_of("app.jobs:nightly") is None

    def test_a_url_of_another_scheme_is_refused(self) -> None:
        with pytest.raises(ConfigurationError, match="memory://"):
            MemoryControlStore("redis://h")


class TestStoredRecords:
    @pytest.mark.parametrize(
        ("decode", "text"),
        [
            (decode_pause, "not json"),
            (decode_pause, '{"task": "app.jobs:n", "by": "a", "since": "yesterday"}'),
            (
                decode_backfill,
                '{"task": "t", "start": "x", "end": "y", "by": "a", "requested_at": 1}',
            ),
            (
                decode_schedule,
                '{"name": "n", "descriptor": {"target": "app:f", "colour": 1}, '
                '"by": "a", "added_at": 1}',
            ),
        ],
    )
    def test_a_damaged_or_newer_record_is_a_clear_error(self, decode: object, text: str) -> None:
        assert callable(decode)
        with pytest.raises(ControlRecordError):
            decode(text)

    def test_a_backfill_keeps_its_window_in_utc(self) -> None:
        store = MemoryControlStore("memory://utc-window")
        start = datetime(2026, 3, 1, tzinfo=UTC)
        asked = store.request_backfill("app.jobs:n", start, start.replace(day=2), by="a")
        assert asked.start.tzinfo is UTC
        assert store.backfills() == [asked]
