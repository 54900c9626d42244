"""Construction of `MemcachedLock`: URL kinds, one server, redaction, timeouts, the provider."""

from __future__ import annotations

import pytest

from firefly_scheduling import ConfigurationError
from firefly_scheduling_memcached import MemcachedLock
from firefly_scheduling_memcached.lease_lock import CLIENT_DEFAULTS, memcached_server

SECRET = "s3cr3t-pw"


@pytest.mark.parametrize(
    ("url", "server"),
    [
        ("memcached://127.0.0.1:1", ("127.0.0.1", 1)),
        ("memcached://cache.internal", ("cache.internal", 11211)),
        ("MEMCACHED://cache:11212/", ("cache", 11212)),
        ("memcached://[::1]:11211", ("::1", 11211)),
    ],
)
def test_memcached_urls_are_accepted_without_connecting(url: str, server: tuple[str, int]) -> None:
    assert memcached_server(url) == server
    # Port 1 is closed: construction must not connect.
    assert MemcachedLock(url).is_held("anything") is False


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        (f"memcached://app:{SECRET}@cache:11211", "no authentication"),
        (f"memcached://:{SECRET}@cache", "no authentication"),
        ("memcached://cache-a:11211,cache-b:11211", "one server"),
        ("memcached://cache:11211/0", "host"),
        (f"memcached://cache:11211?password={SECRET}", "host"),
        ("memcached://:11211", "needs a host"),
        ("", "needs a URL"),
    ],
)
def test_what_memcached_cannot_use_is_refused_without_the_password(url: str, reason: str) -> None:
    with pytest.raises(ConfigurationError, match=reason) as caught:
        MemcachedLock(url)
    assert SECRET not in str(caught.value)


def test_repr_shows_the_url() -> None:
    assert repr(MemcachedLock(" memcached://cache:11211 ")) == (
        "MemcachedLock('memcached://cache:11211')"
    )


def test_the_client_has_bounded_timeouts_and_waits_for_replies() -> None:
    client = MemcachedLock("memcached://127.0.0.1:1")._client.client
    assert (client.connect_timeout, client.timeout) == (
        CLIENT_DEFAULTS["connect_timeout"],
        CLIENT_DEFAULTS["timeout"],
    )
    assert client.default_noreply is False
