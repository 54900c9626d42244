"""Every provider, first- or third-party, reads `FIREFLY_SCHEDULING_LOCK_<NAME>_URL`."""

from __future__ import annotations

import pytest

from firefly_scheduling import ConfigurationError, Settings


def test_a_third_party_provider_reads_its_url_key() -> None:
    settings = Settings.from_env({"FIREFLY_SCHEDULING_LOCK_ETCD_URL": " etcd://127.0.0.1:2379 "})
    assert settings.url_for("etcd") == "etcd://127.0.0.1:2379"


def test_a_third_party_provider_without_a_url_names_its_key() -> None:
    with pytest.raises(ConfigurationError, match="FIREFLY_SCHEDULING_LOCK_ACME_URL"):
        Settings.from_env({}).url_for("acme")


def test_first_party_keys_keep_their_fallbacks() -> None:
    settings = Settings.from_env({"DATABASE_URL": "postgresql://app@db/app"})
    assert settings.url_for("postgres") == "postgresql://app@db/app"
    assert "postgres" not in settings.lock_urls


def test_a_url_key_wins_over_the_fallbacks() -> None:
    settings = Settings.from_env(
        {"FIREFLY_SCHEDULING_LOCK_POSTGRES_URL": "postgresql://a@x/a", "DATABASE_URL": "b"}
    )
    assert settings.url_for("postgres") == "postgresql://a@x/a"


def test_settings_built_by_hand_read_no_fallback() -> None:
    with pytest.raises(ConfigurationError, match="or DATABASE_URL"):
        Settings(lock_provider="postgres").url_for("postgres")


def test_a_provider_default_applies_when_nothing_is_set() -> None:
    assert Settings().url_for("redis") == "redis://127.0.0.1:6379/0"


def test_an_uninstalled_name_has_its_key_alone() -> None:
    settings = Settings.from_env({"FIREFLY_SCHEDULING_LOCK_MY_STORE_URL": "x://h"})
    assert settings.url_for("my-store") == "x://h"
    with pytest.raises(ConfigurationError, match="FIREFLY_SCHEDULING_LOCK_OTHER_URL"):
        settings.url_for("other")


def test_third_party_urls_never_appear_in_repr() -> None:
    settings = Settings.from_env({"FIREFLY_SCHEDULING_LOCK_ETCD_URL": "etcd://u:s3cr3t@h:1"})
    assert "s3cr3t" not in repr(settings)
