"""The memcached anchor store takes the lock's URL rules (it reuses `memcached_server`)."""

from __future__ import annotations

import pytest

from firefly_scheduling import ConfigurationError
from firefly_scheduling_memcached.anchor_store import MemcachedAnchorStore


@pytest.mark.parametrize(
    "url",
    [
        "memcached://app:s3cr3t-pw@127.0.0.1:11211",
        "memcached://127.0.0.1:11211,127.0.0.1:11212",
        "memcached://127.0.0.1:11211/extra",
        "redis://:s3cr3t-pw@127.0.0.1:6379/0",
    ],
)
def test_unusable_urls_are_refused_without_the_password(url: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        MemcachedAnchorStore(url)
    assert "s3cr3t-pw" not in str(caught.value)
