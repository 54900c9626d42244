"""Every provider, first- or third-party, reads `FIREFLY_SCHEDULING_LOCK_<NAME>_URL`."""

from __future__ import annotations

import pytest

from firefly_scheduling import ConfigurationError, Settings


def test_a_third_party_provider_reads_its_url_key() -> None:
    settings = Settings.from_env({"FIREFLY_SCHEDULING_LOCK_ETCD_URL": " etcd://127.0.0.1:2379 "})
    assert settings.url_for("etcd") == "etcd://127.0.0.1:2379"


def test_a_third_party_provider_without_a_url_names_its_key() -> None:
    with pytest.raises(ConfigurationError, match="FIREFLY_SCHEDULING_LOCK_ETCD_URL"):
        Settings.from_env({}).url_for("etcd")


def test_first_party_keys_keep_their_fallbacks() -> None:
    settings = Settings.from_env({"DATABASE_URL": "postgresql://app@db/app"})
    assert settings.url_for("postgres") == "postgresql://app@db/app"
    assert "postgres" not in settings.other_lock_urls


def test_third_party_urls_never_appear_in_repr() -> None:
    settings = Settings.from_env({"FIREFLY_SCHEDULING_LOCK_ETCD_URL": "etcd://u:s3cr3t@h:1"})
    assert "s3cr3t" not in repr(settings)
