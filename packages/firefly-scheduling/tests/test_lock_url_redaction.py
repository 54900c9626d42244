"""Credentials never survive `redact_url`; URLs without any are returned untouched."""

from __future__ import annotations

import pytest

from firefly_scheduling.locks.redaction import redact_url, scrub, url_secrets


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:s3cret@127.0.0.1:6379/0", "redis://:***@127.0.0.1:6379/0"),
        ("postgresql://app:s3cret@db/app", "postgresql://app:***@db/app"),
        ("mysql://app:s3cret@db/app?password=s3cret", "mysql://app:***@db/app?password=***"),
        ("postgresql://app@db/app", "postgresql://app@db/app"),
        ("sqlite:////var/lib/app/locks.sqlite3", "sqlite:////var/lib/app/locks.sqlite3"),
        ("redis://127.0.0.1:99999999/0", "<unparseable URL>"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    for secret in url_secrets(url):
        assert secret not in redact_url(url)


def test_scrub_removes_every_secret_from_a_driver_message() -> None:
    message = "auth failed for app:s3cret (password s3cret)"
    assert scrub(message, url_secrets("postgresql://app:s3cret@db/app")) == (
        "auth failed for app:*** (password ***)"
    )
