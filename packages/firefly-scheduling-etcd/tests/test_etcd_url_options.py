"""A misspelt URL option of the etcd lock is refused naming the nearest known one."""

from __future__ import annotations

import pytest

from firefly_scheduling import ConfigurationError
from firefly_scheduling_etcd import AsyncEtcdLock, EtcdLock


@pytest.mark.parametrize("build", [EtcdLock, AsyncEtcdLock])
@pytest.mark.parametrize(("option", "meant"), [("timout", "timeout"), ("pool_sise", "pool_size")])
def test_a_misspelt_option_names_the_nearest_known_one(
    build: type, option: str, meant: str
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        build(f"etcd://127.0.0.1:1?{option}=3")
    assert f"'{option}'" in str(raised.value)
    assert f"did you mean '{meant}'" in str(raised.value)
