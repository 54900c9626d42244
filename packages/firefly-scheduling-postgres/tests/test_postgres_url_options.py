"""A misspelt libpq parameter is refused by its name, never by its value.

libpq's own complaint quotes the parameter; the refusal used to mask every quoted
word it did not know as `"***"` (a stray word of a key=value string may be a
password), which hid the very name to correct. A parameter's name sits where no
value can: it is shown, with the nearest libpq keyword.
"""

from __future__ import annotations

import pytest

from firefly_scheduling import ConfigurationError
from firefly_scheduling_postgres import AsyncPgAdvisoryLock, PgAdvisoryLock

SECRET = "s3cr3t-pw"


@pytest.mark.parametrize(
    "text",
    [
        f"postgresql://app:{SECRET}@127.0.0.1:1/app?sslmod=require",
        f"host=127.0.0.1 port=1 user=app password={SECRET} sslmod=require",
    ],
)
@pytest.mark.parametrize("build", [PgAdvisoryLock, AsyncPgAdvisoryLock])
def test_a_misspelt_parameter_is_named_with_the_nearest_keyword(text: str, build: type) -> None:
    with pytest.raises(ConfigurationError) as raised:
        build(text)
    message = str(raised.value)
    assert '"sslmod"' in message
    assert "did you mean 'sslmode'" in message
    assert SECRET not in message
    assert "=require" not in message  # the value, even in the URL shown


def test_a_password_typed_without_its_key_is_still_masked() -> None:
    with pytest.raises(ConfigurationError) as raised:
        PgAdvisoryLock(f"host=127.0.0.1 user=app {SECRET}")
    assert SECRET not in str(raised.value)


def test_the_value_of_a_misspelt_password_parameter_is_never_shown() -> None:
    with pytest.raises(ConfigurationError) as raised:
        PgAdvisoryLock(f"postgresql://app@127.0.0.1:1/app?passwrod={SECRET}")
    assert '"passwrod"' in str(raised.value)
    assert SECRET not in str(raised.value)
