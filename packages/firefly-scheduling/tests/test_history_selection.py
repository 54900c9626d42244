"""Which run history the settings select, and the settings keys behind it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from firefly_scheduling.errors import ConfigurationError, DurationError
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.history import MemoryRunHistory, history_url, resolve_history
from firefly_scheduling.locks import InMemoryLock
from firefly_scheduling.settings import Settings


class TestHistoryUrl:
    @pytest.mark.parametrize("provider", ["none", "memory", "redis", "memcached"])
    def test_no_history_by_default_without_a_sql_database(self, provider: str) -> None:
        assert history_url(Settings(lock_provider=provider)) is None
        assert resolve_history(Settings(lock_provider=provider)) is None

    def test_the_database_provider_records_in_its_own_database(self) -> None:
        settings = Settings(lock_provider="database", lock_urls={"database": "sqlite:///locks.db"})
        assert history_url(settings) == "sqlite:///locks.db"

    @pytest.mark.parametrize(
        ("provider", "url"), [("postgres", "postgresql://h/db"), ("mysql", "mysql://h/db")]
    )
    def test_session_providers_record_on_their_server_at_their_url(
        self, provider: str, url: str
    ) -> None:
        # The database store maps the bare schemes to its drivers itself.
        settings = Settings(lock_provider=provider, lock_urls={provider: url})
        assert history_url(settings) == url

    def test_an_explicit_url_wins(self) -> None:
        settings = Settings(lock_provider="database", lock_urls={"database": "sqlite:///a.db"})
        assert history_url(replace(settings, history_url="memory://")) == "memory://"

    def test_off_turns_it_off_whatever_the_provider(self) -> None:
        settings = Settings(
            lock_provider="database", lock_urls={"database": "sqlite:///a.db"}, history_url="OFF"
        )
        assert resolve_history(settings) is None

    def test_memory_is_built_in(self) -> None:
        assert isinstance(resolve_history(Settings(history_url="memory://")), MemoryRunHistory)

    def test_an_unknown_scheme_is_refused_without_the_password(self) -> None:
        settings = Settings(history_url="cassandra://admin:hunter2@db:9042/x")
        with pytest.raises(ConfigurationError) as caught:
            resolve_history(settings)
        message = str(caught.value)
        assert "cassandra" in message
        assert "FIREFLY_SCHEDULING_HISTORY_URL" in message
        assert "hunter2" not in message


class TestSettingsKeys:
    def test_the_keys_are_read_from_the_environment(self) -> None:
        settings = Settings.from_env(
            {
                "FIREFLY_SCHEDULING_HISTORY_URL": "memory://",
                "FIREFLY_SCHEDULING_FIRES_GRACE": "2m",
                "FIREFLY_SCHEDULING_FIRES_CLOCK_SKEW": "500ms",
                "FIREFLY_SCHEDULING_NODE": "web-1",
            }
        )
        assert (settings.history_url, settings.grace, settings.clock_skew, settings.node) == (
            "memory://",
            120.0,
            0.5,
            "web-1",
        )

    def test_defaults(self) -> None:
        settings = Settings.from_env({})
        assert (settings.history_url, settings.grace, settings.clock_skew) == ("", 60.0, 5.0)
        assert settings.node  # hostname-pid

    def test_a_bad_grace_names_the_variable(self) -> None:
        with pytest.raises(DurationError, match="FIREFLY_SCHEDULING_FIRES_GRACE"):
            Settings.from_env({"FIREFLY_SCHEDULING_FIRES_GRACE": "soon"})

    def test_the_history_password_is_not_in_the_repr(self) -> None:
        assert "hunter2" not in repr(Settings(history_url="postgresql://u:hunter2@h/db"))

    def test_a_runner_from_settings_uses_them(self) -> None:
        settings = Settings(history_url="memory://", node="web-1")
        runner = FireRunner.from_settings(InMemoryLock(), settings)
        assert isinstance(runner.history, MemoryRunHistory)
        assert runner.node == "web-1"
        runner.close()
