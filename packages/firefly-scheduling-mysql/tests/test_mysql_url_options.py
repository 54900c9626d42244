"""A misspelt URL option of the mysql lock is refused naming the nearest known one."""

from __future__ import annotations

import pytest

from firefly_scheduling import ConfigurationError
from firefly_scheduling_mysql import AsyncMySqlNamedLock, MySqlNamedLock

SECRET = "s3cr3t-pw"


@pytest.mark.parametrize("build", [MySqlNamedLock, AsyncMySqlNamedLock])
def test_a_misspelt_option_names_the_nearest_known_one(build: type) -> None:
    with pytest.raises(ConfigurationError) as raised:
        build(f"mysql://app:{SECRET}@127.0.0.1:1/app?connect_timout=5")
    message = str(raised.value)
    assert "'connect_timout'" in message
    assert "did you mean 'connect_timeout'" in message
    assert SECRET not in message
