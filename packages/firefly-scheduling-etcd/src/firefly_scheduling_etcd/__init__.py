"""etcd lease-lock backend for firefly-scheduling (provider `etcd`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from firefly_scheduling.providers.lazy import lock_exports
from firefly_scheduling_etcd.provider import PROVIDER
from firefly_scheduling_etcd.version import __version__

if TYPE_CHECKING:
    from firefly_scheduling_etcd.lock import EtcdLock
    from firefly_scheduling_etcd.lock_async import AsyncEtcdLock

__all__ = ["AsyncEtcdLock", "EtcdLock", "__version__"]

# The lock classes the descriptor names, imported on first use: loading the descriptor
# (`provider.py`) imports no driver.
__getattr__ = lock_exports(__name__, PROVIDER)
