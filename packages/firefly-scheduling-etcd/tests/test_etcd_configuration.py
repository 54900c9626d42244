"""Construction of `EtcdLock`: URL kinds, options, TLS files, refusals, redaction, the provider."""

from __future__ import annotations

import ssl
from dataclasses import replace
from pathlib import Path

import pytest

from firefly_scheduling import ConfigurationError, Settings
from firefly_scheduling.locks.providers import resolve_lock
from firefly_scheduling_etcd import EtcdLock
from firefly_scheduling_etcd.url import DEFAULT_TIMEOUT_SECONDS, parse_url

SECRET = "s3cr3t-pw"


def create_lock(settings: Settings) -> object:
    """The lock the `etcd` provider's descriptor builds from `settings`."""
    return resolve_lock(replace(settings, lock_provider="etcd"))


@pytest.mark.parametrize(
    ("url", "base_url"),
    [
        ("etcd://127.0.0.1:1", "http://127.0.0.1:1"),
        ("etcd://etcd.internal", "http://etcd.internal:2379"),
        ("ETCD://etcd.internal:2381/", "http://etcd.internal:2381"),
        ("etcd://[::1]:2379", "http://[::1]:2379"),
        ("etcds://etcd.internal", "https://etcd.internal:2379"),
        ("  etcd://127.0.0.1:2379  ", "http://127.0.0.1:2379"),
    ],
)
def test_url_kinds_are_accepted_without_connecting(url: str, base_url: str) -> None:
    # Port 1 is closed and the other hosts do not resolve: construction must not connect.
    assert parse_url(url).base_url == base_url
    lock = EtcdLock(url)
    assert lock.is_held("anything") is False
    lock.close()


def test_the_timeout_defaults_to_three_seconds_and_reads_a_duration() -> None:
    assert parse_url("etcd://h").timeout == DEFAULT_TIMEOUT_SECONDS == 3.0
    assert parse_url("etcd://h?timeout=500ms").timeout == 0.5
    assert parse_url("etcd://h?timeout=10").timeout == 10.0


@pytest.mark.parametrize(
    "url",
    [
        f"etcd://root:{SECRET}@127.0.0.1:2379",
        f"etcds://:{SECRET}@etcd.internal",
        "etcd://root@127.0.0.1:2379",
    ],
)
def test_credentials_are_refused_without_showing_the_password(url: str) -> None:
    with pytest.raises(ConfigurationError, match="authentication is not supported") as caught:
        EtcdLock(url)
    assert SECRET not in str(caught.value)
    assert caught.value.__cause__ is None


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("etcd://:2379", "needs a host"),
        ("etcd:///", "needs a host"),
        ("etcd://h:2379/v3/", r"got a path in the URL \(etcd://h:2379/v3/\)"),
        ("etcd://h?tls=true", r"does not know the URL option 'tls'.*known options: timeout"),
        ("etcd://h?timeout=1s&timeout=2s", "'timeout' twice"),
        ("etcd://h?timeout=", "empty URL option 'timeout'"),
        ("etcd://h?timeout=soon", r"timeout= of the etcd URL etcd://h\?timeout=soon"),
        ("etcd://h?timeout=-1s", "timeout="),
        ("etcd://h?cacert=/etc/ca.pem", "TLS option 'cacert' on a plain etcd:// URL"),
        ("etcds://h?key=/etc/k.pem", "key= without cert="),
        ("etcd://h:99999", "the port is not a whole number"),
    ],
)
def test_bad_urls_are_refused_naming_the_problem(url: str, problem: str) -> None:
    with pytest.raises(ConfigurationError, match=problem):
        EtcdLock(url)


def test_a_malformed_url_with_a_password_never_shows_it() -> None:
    with pytest.raises(ConfigurationError) as caught:
        EtcdLock(f"etcd://root:{SECRET}@h:notaport")
    assert SECRET not in str(caught.value)


def test_a_missing_tls_file_is_named_at_construction(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-ca.pem"
    with pytest.raises(ConfigurationError, match="cannot load the TLS files") as caught:
        EtcdLock(f"etcds://h?cacert={missing}")
    assert "FileNotFoundError" in str(caught.value)


def test_an_etcds_url_verifies_against_the_system_cas_by_default() -> None:
    context = parse_url("etcds://etcd.internal").ssl_context()
    assert context is not None
    assert context.verify_mode is ssl.CERT_REQUIRED
    assert context.check_hostname is True
    assert parse_url("etcd://etcd.internal").ssl_context() is None


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("etcd://etcd.internal:2381", "EtcdLock('etcd://etcd.internal:2381')"),
        ("etcds://etcd.internal?timeout=5s", "EtcdLock('etcds://etcd.internal?timeout=5s')"),
    ],
)
def test_repr_shows_the_url(url: str, shown: str) -> None:
    assert repr(EtcdLock(url)) == shown


def test_provider_reads_its_url_key_and_defaults_to_the_local_member() -> None:
    settings = Settings.from_env({"FIREFLY_SCHEDULING_LOCK_ETCD_URL": "etcd://etcd.internal"})
    assert repr(create_lock(settings)) == "EtcdLock('etcd://etcd.internal')"
    assert repr(create_lock(Settings.from_env({}))) == "EtcdLock('etcd://127.0.0.1:2379')"
