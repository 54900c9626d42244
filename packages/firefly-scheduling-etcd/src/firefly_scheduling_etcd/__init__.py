"""etcd lease-lock backend for firefly-scheduling (provider `etcd`)."""

from __future__ import annotations

from firefly_scheduling_etcd.aio_lease_lock import AsyncEtcdLock
from firefly_scheduling_etcd.lease_lock import EtcdLock
from firefly_scheduling_etcd.version import __version__

__all__ = ["AsyncEtcdLock", "EtcdLock", "__version__"]
