"""Credentials never survive `redact_url`; URLs without any are returned untouched."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.urls.connection_url import parse_lock_url, url_problem
from firefly_scheduling.urls.redaction import redact_url, scrub, url_secrets


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:s3cret@127.0.0.1:6379/0", "redis://:***@127.0.0.1:6379/0"),
        ("postgresql://app:s3cret@db/app", "postgresql://app:***@db/app"),
        ("mysql://app:s3cret@db/app?password=s3cret", "mysql://app:***@db/app?password=***"),
        ("postgresql://app@db/app", "postgresql://app@db/app"),
        ("sqlite:////var/lib/app/locks.sqlite3", "sqlite:////var/lib/app/locks.sqlite3"),
        # Nothing to hide: a malformed URL without credentials is shown as it is.
        ("redis://127.0.0.1:99999999/0", "redis://127.0.0.1:99999999/0"),
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


# -- malformed URLs and libpq strings --------------------------------


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        # Everything between :// and the LAST @ is userinfo, whatever urllib makes of it.
        ("redis://user:Sup3rS3cret/x@host", "redis://user:***@host"),
        ("redis://user:pa#ss@host/0", "redis://user:***@host/0"),
        ("redis://user:pa?ss@host/0", "redis://user:***@host/0"),
        ("redis://user:pa@ss@host/0", "redis://user:***@host/0"),
        ("redis://user:12#34@host/0", "redis://user:***@host/0"),
        ("redis://:a:b:c@host", "redis://:***@host"),
        # A user name no user name could be may be a password missing its colon.
        ("redis://Sup3r/S3cret@host/0", "redis://***@host/0"),
        ("redis://Sup3r#S3cret@host/0", "redis://***@host/0"),
        # ... but a path that happens to hold an @ is no authority at all.
        ("sqlite:////var/app@2/x.db", "sqlite:////var/app@2/x.db"),
        ("user:s3cret@host:6379", "user:***@host:6379"),
        ("redis://host/0?password=s3cr3t#frag", "redis://host/0?password=***"),
        ("redis://host/0?PASSWORD=s3cr3t&db=1", "redis://host/0?PASSWORD=***&db=1"),
        ("postgresql://h/db?sslpassword=k3y&oauth_client_secret=c", "postgresql://h/db?sslpassword=***&oauth_client_secret=***"),
        # libpq key=value strings: secret values and stray words are hidden.
        ("host=db dbname=app user=u password=p", "host=db dbname=app user=u password=***"),
        ("host=db password = 'a b\\' c' user=x", "host=db password = *** user=x"),
        ("host=db password=a\\ b user=x", "host=db password=*** user=x"),
        ("host=db password s3cr3t", "host=db *** ***"),
        ("host=db password=p@ss", "host=db password=***"),
        # Nothing to hide, or nothing recognisable as a credential.
        ("off", "off"),
        ("memory://", "memory://"),
        ("", ""),
    ],
)  # fmt: skip
def test_redaction_is_conservative_for_any_string(url: str, shown: str) -> None:
    assert redact_url(url) == shown


@pytest.mark.parametrize(
    ("url", "secrets"),
    [
        ("redis://u:pa%23ss@h/0", ("pa%23ss", "pa#ss")),
        ("redis://u:pa#ss@h/0", ("pa#ss",)),
        ("host=db password='a b\\' c'", ("'a b\\' c'", "a b' c")),
        ("host=db password=a\\ b", ("a\\ b", "a b")),
        ("redis://Sup3r/S3cret@h/0", ("Sup3r/S3cret",)),
        ("redis://h/0", ()),
    ],
)
def test_url_secrets_include_the_forms_a_driver_would_echo(
    url: str, secrets: tuple[str, ...]
) -> None:
    assert set(url_secrets(url)) >= set(secrets)
    assert all(secret for secret in url_secrets(url))


def test_scrub_removes_the_longest_secret_first() -> None:
    assert scrub("key abcdef and abc", ["abc", "abcdef"]) == "key *** and ***"


@pytest.mark.parametrize("url", ["redis://user:Sup3rS3cret/x@host", "redis://u:12#34@h/0"])
def test_parse_lock_url_asks_to_percent_encode_and_keeps_no_parser_error(url: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        parse_lock_url(url, provider="redis", schemes=["redis"])
    error = raised.value
    assert "percent-encode" in str(error)
    for secret in url_secrets(url):
        assert secret not in str(error)
    assert error.__cause__ is None
    assert error.__context__ is None


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("redis://u:p@127.0.0.1:99999/0", "the port is not a whole number from 0 to 65535"),
        ("redis://u:p@127.0.0.1:six/0", "the port is not a whole number from 0 to 65535"),
        ("redis://u:p@[::1/0", "not a well-formed URL"),
        ("redis://u:50%@h/0", "holds a '%' that starts no %XX escape"),
        ("s3cr3t-value", "scheme-less value (no 'scheme://'; not shown"),
        ("ftp://u:s3cr3t@h/0", "cannot use a 'ftp' URL (ftp://u:***@h/0)"),
    ],
)
def test_parse_lock_url_says_what_is_wrong_in_its_own_words(url: str, fragment: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        parse_lock_url(url, provider="redis", schemes=["redis"])
    assert fragment in str(raised.value)
    assert "s3cr3t" not in str(raised.value)
    assert raised.value.__context__ is None


PASSWORD_CHARACTERS = st.characters(
    codec="utf-8", categories=["L", "N", "P", "S"], exclude_characters="\\"
)


@settings(deadline=None)  # a loaded machine must not fail a logic test
@given(password=st.text(PASSWORD_CHARACTERS, min_size=6, max_size=30))
def test_no_password_survives_redaction_or_a_refusal(password: str) -> None:
    url = f"redis://user:{password}@127.0.0.1:6379/0"
    assert password not in redact_url(url).replace("user:***@127.0.0.1:6379/0", "")
    assert password in url_secrets(url)
    if url_problem(url) is None:  # accepted: every parser then reads the same password
        assert parse_lock_url(url, provider="redis", schemes=["redis"]).password == password
    else:
        with pytest.raises(ConfigurationError) as raised:
            parse_lock_url(url, provider="redis", schemes=["redis"])
        assert password not in str(raised.value)
