"""A misspelt URL option of the memcached lock is refused naming the nearest known one."""

from __future__ import annotations

import pytest

from firefly_scheduling import ConfigurationError
from firefly_scheduling_memcached import AsyncMemcachedLock, MemcachedLock


@pytest.mark.parametrize("build", [MemcachedLock, AsyncMemcachedLock])
def test_a_misspelt_option_names_the_nearest_known_one(build: type) -> None:
    with pytest.raises(ConfigurationError) as raised:
        build("memcached://127.0.0.1:1?pool_sise=3")
    assert "'pool_sise'" in str(raised.value)
    assert "did you mean 'pool_size'" in str(raised.value)
