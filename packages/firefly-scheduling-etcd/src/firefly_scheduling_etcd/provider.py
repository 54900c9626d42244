"""The `etcd` provider's descriptor (entry point `firefly_scheduling.lock_providers`).

Its URL defaults to the local member. It keeps its control store at the lock's URL
by default, and no anchors or run history of its own: the initial-delay gate then
uses process memory, and the history is off unless `firefly.scheduling.history.url`
names one.
"""

from __future__ import annotations

from firefly_scheduling.providers import LockProvider
from firefly_scheduling_etcd.url import DEFAULT_URL

PROVIDER = LockProvider(
    name="etcd",
    lock="firefly_scheduling_etcd.lock:EtcdLock",
    async_lock="firefly_scheduling_etcd.lock_async:AsyncEtcdLock",
    default_url=DEFAULT_URL,
    control_store="firefly_scheduling_etcd.control_store:create_control_store",
    async_control_store="firefly_scheduling_etcd.control_store_async:create_control_store",
    store_schemes=("etcd", "etcds"),
    stores_at_lock_url=("control_store",),
    extra="firefly-scheduling[etcd]",
)
