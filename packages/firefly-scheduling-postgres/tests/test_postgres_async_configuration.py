"""`AsyncPgAdvisoryLock` reads a connection string exactly as `PgAdvisoryLock` does.

Both flavours parse with `PostgresConnection`; these cases prove the asyncio one
accepts libpq key=value strings too, refuses the same strings with the same words,
and hides the same secrets.
"""

from __future__ import annotations

import pytest

from firefly_scheduling import ConfigurationError
from firefly_scheduling_postgres import AsyncPgAdvisoryLock, PgAdvisoryLock

SECRET = "s3cr3t-pw"


@pytest.mark.parametrize(
    "text",
    [
        "",
        SECRET,
        f"mysql://app:{SECRET}@db/app",
        f"postgresql://app:{SECRET}@db/app?no_such_parameter=1",
        f"host=db password={SECRET} dbname",
        f"host=db password='{SECRET}",
    ],
)
def test_both_flavours_refuse_a_bad_string_with_the_same_message_and_no_secret(
    text: str,
) -> None:
    with pytest.raises(ConfigurationError) as sync_refusal:
        PgAdvisoryLock(text)
    with pytest.raises(ConfigurationError) as async_refusal:
        AsyncPgAdvisoryLock(text)
    assert str(async_refusal.value) == str(sync_refusal.value)
    assert SECRET not in str(async_refusal.value)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (
            f"postgresql://app:{SECRET}@db.internal:5432/app",
            "AsyncPgAdvisoryLock('postgresql://app:***@db.internal:5432/app')",
        ),
        (
            f"host=127.0.0.1 port=1 dbname=app user=app password={SECRET}",
            "AsyncPgAdvisoryLock('host=127.0.0.1 port=1 dbname=app user=app password=***')",
        ),
    ],
)
def test_urls_and_key_value_strings_are_accepted_and_redacted(text: str, shown: str) -> None:
    assert repr(AsyncPgAdvisoryLock(text)) == shown


def test_both_flavours_take_the_same_key() -> None:
    assert AsyncPgAdvisoryLock.key("nightly-report") == PgAdvisoryLock.key("nightly-report")
