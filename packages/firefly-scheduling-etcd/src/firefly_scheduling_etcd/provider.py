"""Entry point of the `etcd` lock provider (group `firefly_scheduling.lock_providers`)."""

from __future__ import annotations

from firefly_scheduling.settings import Settings
from firefly_scheduling_etcd.endpoint import DEFAULT_URL
from firefly_scheduling_etcd.lease_lock import EtcdLock


def create_lock(settings: Settings) -> EtcdLock:
    """Build the lock from `firefly.scheduling.lock.etcd.url`, else the local member."""
    return EtcdLock(settings.other_lock_urls.get("etcd") or DEFAULT_URL)
