"""An unknown query option of a Redis URL is refused when the lock is built.

redis-py passes any query option it does not know to its connection class, so a
typo (`?socket_timeoutt=2`) was accepted at boot and failed every fire with a
`TypeError` (one server), or was silently dropped (a cluster). Every kind of URL,
both flavours and the anchor store refuse it at construction, naming the option and
the nearest known one, never a value.
"""

from __future__ import annotations

import pytest

from firefly_scheduling import ConfigurationError
from firefly_scheduling_redis import AsyncRedisLock, RedisLock
from firefly_scheduling_redis.anchor_store import create_anchor_store

SECRET = "s3cr3t-pw"


@pytest.mark.parametrize(
    "url",
    [
        "redis://127.0.0.1:1/3?socket_timeoutt=2",
        f"redis://:{SECRET}@127.0.0.1:1/3?socket_timeoutt=2",
        "rediss://127.0.0.1:1/0?socket_timeoutt=2",
        "unix:///tmp/no-such-redis.sock?socket_timeoutt=2",
        "redis+cluster://127.0.0.1:1?socket_timeoutt=2",
    ],
)
@pytest.mark.parametrize("build", [RedisLock, AsyncRedisLock, create_anchor_store])
def test_a_misspelt_option_is_refused_at_construction_naming_the_nearest(
    url: str, build: object
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        build(url)  # type: ignore[operator]
    message = str(raised.value)
    assert "'socket_timeoutt'" in message
    assert "did you mean 'socket_timeout'" in message
    assert SECRET not in message


@pytest.mark.parametrize(
    ("url", "option"),
    [
        # TLS options need rediss://.
        ("redis://127.0.0.1:1/0?ssl_certfile=/tmp/c.pem", "ssl_certfile"),
        ("unix:///tmp/no-such-redis.sock?socket_keepalive=true", "socket_keepalive"),
        ("redis://127.0.0.1:1/0?decode_responses=true", "decode_responses"),
    ],
)
def test_an_option_this_kind_of_url_cannot_use_is_refused(url: str, option: str) -> None:
    with pytest.raises(ConfigurationError, match=f"'{option}'"):
        RedisLock(url)


@pytest.mark.parametrize(
    "url",
    [
        "redis://127.0.0.1:1/0?socket_timeout=2&socket_connect_timeout=1&client_name=node-1",
        "redis://127.0.0.1:1/0?health_check_interval=30&socket_keepalive=true&pool_size=2",
        "redis://127.0.0.1:1/0?db=2&protocol=3",
        "rediss://127.0.0.1:1/0?ssl_cert_reqs=required&ssl_check_hostname=true",
        "unix:///tmp/no-such-redis.sock?db=1&socket_timeout=2",
        "redis+cluster://127.0.0.1:1?socket_timeout=2",
    ],
)
def test_the_documented_options_are_accepted(url: str) -> None:
    RedisLock(url).close()


def test_the_value_of_a_misspelt_password_option_is_never_shown() -> None:
    with pytest.raises(ConfigurationError) as raised:
        RedisLock(f"redis://127.0.0.1:1/0?passwrod={SECRET}")
    assert "'passwrod'" in str(raised.value)
    assert "did you mean 'password'" in str(raised.value)
    assert SECRET not in str(raised.value)
