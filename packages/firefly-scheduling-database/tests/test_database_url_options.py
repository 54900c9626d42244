"""An unknown query option of a database URL is refused when the lock is built.

SQLAlchemy hands a URL's query to the driver: PyMySQL failed every fire with a raw
`TypeError`, psycopg with "invalid connection option" reported as a backend error
(so a boot would wait for a server that is fine), and SQLite ignored it with a
warning. Each dialect's options are checked at construction instead, naming the
option and the nearest known one, never a value.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from firefly_scheduling import ConfigurationError
from firefly_scheduling_database import AsyncDatabaseLeaseLock, DatabaseLeaseLock

SECRET = "s3cr3t-pw"


@pytest.mark.parametrize(
    ("url", "option", "meant"),
    [
        (f"postgresql://app:{SECRET}@127.0.0.1:1/app?sslmod=require", "sslmod", "sslmode"),
        (
            f"mysql://app:{SECRET}@127.0.0.1:1/app?connect_timout=5",
            "connect_timout",
            "connect_timeout",
        ),
        ("sqlite:///{path}?timout=3", "timout", "timeout"),
    ],
)
@pytest.mark.parametrize("build", [DatabaseLeaseLock, AsyncDatabaseLeaseLock])
def test_a_misspelt_option_is_refused_at_construction(
    url: str, option: str, meant: str, build: type, tmp_path: Path
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        build(url.format(path=tmp_path / "locks.db"))
    message = str(raised.value)
    assert f"'{option}'" in message
    assert f"did you mean '{meant}'" in message
    assert SECRET not in message


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://app@127.0.0.1:1/app?sslmode=disable&application_name=x&connect_timeout=3",
        "mysql://app@127.0.0.1:1/app?charset=utf8mb4&connect_timeout=3&read_timeout=4",
        "mysql://app@127.0.0.1:1/app?ssl_ca=/tmp/ca.pem&ssl_check_hostname=false",
        "sqlite:///{path}?timeout=3&journal_mode=keep",
        "sqlite:///{path}?uri=true&mode=rw",
    ],
)
def test_the_drivers_options_are_accepted(url: str, tmp_path: Path) -> None:
    DatabaseLeaseLock(url.format(path=tmp_path / "locks.db")).close()
