"""The provider contract: how every backend is configured, written once.

A backend's provider must be found through the entry-point group, read its URL key
(with the documented fallback), refuse a URL of another kind naming itself and the
scheme but never the password, and show only a redacted URL in `repr`. A backend
subclasses `ProviderContract`, sets the class attributes and supplies
`configured_url`; the cases below then run against it.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

import pytest

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.locks.port import AsyncDistributedLock
from firefly_scheduling.locks.providers import resolve_async_lock, resolve_lock
from firefly_scheduling.providers.registry import load_provider
from firefly_scheduling.settings import Settings, env_var


class ProviderContract:
    """Configuration rules every lock provider follows."""

    #: The provider name (entry point and `FIREFLY_SCHEDULING_LOCK_PROVIDER` value).
    provider: ClassVar[str]
    #: The lock class the provider builds.
    lock_class: ClassVar[type[Any]]
    #: Expected capability flags, e.g. {"ttl_honoured": True, "session_scoped": False}.
    capabilities: ClassVar[dict[str, object]]
    #: URLs of other kinds, each with the scheme the refusal must name.
    wrong_kind_urls: ClassVar[tuple[tuple[str, str], ...]]
    #: A password the wrong-kind URLs may carry; it must never be shown.
    secret: ClassVar[str] = "s3cr3t-pw"  # noqa: S105 - a marker to look for, not a credential
    #: `repr` of the lock built with no URL configured, or None when a URL is required.
    default_repr: ClassVar[str | None] = None
    #: Whether `DATABASE_URL` is the documented fallback of this provider's URL key.
    falls_back_to_database_url: ClassVar[bool] = False

    @pytest.fixture
    def configured_url(self) -> tuple[str, str]:
        """`(url, expected repr of the lock built from it)`; the URL must not connect."""
        raise NotImplementedError("a ProviderContract subclass must provide configured_url")

    @property
    def url_variable(self) -> str:
        return env_var(f"firefly.scheduling.lock.{self.provider}.url")

    def test_the_entry_point_loads_the_providers_descriptor(self) -> None:
        descriptor = load_provider(self.provider, source="the provider contract")
        assert descriptor.name == self.provider
        assert descriptor.url_key == f"firefly.scheduling.lock.{self.provider}.url"

    def test_the_async_lock_is_built_from_the_same_keys_or_refused_by_name(
        self, configured_url: tuple[str, str]
    ) -> None:
        url, shown = configured_url
        settings = Settings.from_env(
            {"FIREFLY_SCHEDULING_LOCK_PROVIDER": self.provider, self.url_variable: url}
        )
        if load_provider(self.provider, source="the provider contract").async_lock is None:
            with pytest.raises(ConfigurationError, match=f"'{self.provider}' lock provider"):
                resolve_async_lock(settings)
            return
        lock = resolve_async_lock(settings)
        assert isinstance(lock, AsyncDistributedLock)
        # The same redacted target as the sync lock's repr, whatever the class is called;
        # a URL's scheme may name the asyncio driver the same setting maps to.
        where = shown.partition("(")[2]
        assert where.partition("://")[2] in repr(lock)
        asyncio.run(lock.aclose())

    def test_capabilities_are_declared(self) -> None:
        for flag, expected in self.capabilities.items():
            assert getattr(self.lock_class, flag) == expected, flag

    def test_other_url_kinds_are_refused_naming_provider_and_scheme(self) -> None:
        for url, scheme in self.wrong_kind_urls:
            with pytest.raises(ConfigurationError) as caught:
                self.lock_class(url)
            message = str(caught.value)
            assert f"{self.provider} lock provider" in message, message
            assert scheme in message, message
            assert self.secret not in message

    @pytest.mark.parametrize("url", ["", "   "])
    def test_an_empty_url_is_refused(self, url: str) -> None:
        with pytest.raises(ConfigurationError, match=self.provider):
            self.lock_class(url)

    def test_the_provider_reads_its_url_key(self, configured_url: tuple[str, str]) -> None:
        url, shown = configured_url
        lock = resolve_lock(
            Settings.from_env(
                {"FIREFLY_SCHEDULING_LOCK_PROVIDER": self.provider, self.url_variable: url}
            )
        )
        assert isinstance(lock, self.lock_class)
        assert repr(lock) == shown

    def test_without_a_url(self) -> None:
        settings = Settings.from_env({"FIREFLY_SCHEDULING_LOCK_PROVIDER": self.provider})
        if self.default_repr is None:
            with pytest.raises(ConfigurationError, match=self.url_variable):
                resolve_lock(settings)
        else:
            assert repr(resolve_lock(settings)) == self.default_repr

    def test_database_url_fallback(self, configured_url: tuple[str, str]) -> None:
        url, shown = configured_url
        env = {"FIREFLY_SCHEDULING_LOCK_PROVIDER": self.provider, "DATABASE_URL": url}
        if self.falls_back_to_database_url:
            assert repr(resolve_lock(Settings.from_env(env))) == shown
        elif self.default_repr is None:
            with pytest.raises(ConfigurationError, match=self.url_variable):
                resolve_lock(Settings.from_env(env))
        else:
            assert repr(resolve_lock(Settings.from_env(env))) == self.default_repr
