"""Construction of `MemcachedLock`: URL kinds, one server, redaction, timeouts, the provider."""

from __future__ import annotations

import re

import pytest

from firefly_scheduling import ConfigurationError
from firefly_scheduling.concurrency.pool_size import DEFAULT_POOL_SIZE
from firefly_scheduling_memcached import AsyncMemcachedLock, MemcachedLock
from firefly_scheduling_memcached.url import CLIENT_DEFAULTS, memcached_server

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
        (f"memcached://cache:11211?password={SECRET}", "does not know the URL option 'password'"),
        ("memcached://cache?pool_size=2&pool_size=3", "'pool_size' twice"),
        ("memcached://cache?pool_size=", "empty URL option 'pool_size'"),
        ("memcached://cache?pool_size=0", "pool_size= of the memcached URL"),
        ("memcached://cache?pool_size=many", "pool_size= of the memcached URL"),
        ("memcached://cache:11211#frag", "host"),
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


@pytest.mark.parametrize("lock_class", [MemcachedLock, AsyncMemcachedLock])
def test_connections_have_bounded_timeouts_and_a_bounded_pool(
    lock_class: type[MemcachedLock | AsyncMemcachedLock],
) -> None:
    lock = lock_class("memcached://127.0.0.1:1")
    assert lock._pool.connect_timeout == CLIENT_DEFAULTS["connect_timeout"]
    assert lock._pool.timeout == CLIENT_DEFAULTS["timeout"]
    assert lock._pool.size == DEFAULT_POOL_SIZE
    assert lock_class("memcached://127.0.0.1:1", pool_size=2)._pool.size == 2


@pytest.mark.parametrize("lock_class", [MemcachedLock, AsyncMemcachedLock])
def test_the_pool_size_comes_from_the_argument_else_the_url(
    lock_class: type[MemcachedLock | AsyncMemcachedLock],
) -> None:
    """A deployment configured by URL alone (the `run` host) can set the bound too."""
    assert lock_class("memcached://127.0.0.1:1?pool_size=2")._pool.size == 2
    assert lock_class("memcached://127.0.0.1:1?pool_size=2", pool_size=2).pool_size == 2
    with pytest.raises(ConfigurationError, match=r"pool_size=3 as an argument.*pool_size=2"):
        lock_class("memcached://127.0.0.1:1?pool_size=2", pool_size=3)


@pytest.mark.parametrize("lock_class", [MemcachedLock, AsyncMemcachedLock])
@pytest.mark.parametrize("size", [0, -1, 1.5, "4", True])
def test_a_pool_size_that_is_not_a_positive_whole_number_is_refused(
    lock_class: type[MemcachedLock | AsyncMemcachedLock], size: object
) -> None:
    with pytest.raises(ConfigurationError, match=f"pool_size.*{re.escape(repr(size))}"):
        lock_class("memcached://127.0.0.1:1", pool_size=size)  # type: ignore[arg-type]


def test_the_async_lock_takes_the_same_urls_and_refuses_the_same_way() -> None:
    assert repr(AsyncMemcachedLock(" memcached://cache:11211 ")) == (
        "AsyncMemcachedLock('memcached://cache:11211')"
    )
    with pytest.raises(ConfigurationError, match="no authentication") as caught:
        AsyncMemcachedLock(f"memcached://app:{SECRET}@cache:11211")
    assert SECRET not in str(caught.value)
