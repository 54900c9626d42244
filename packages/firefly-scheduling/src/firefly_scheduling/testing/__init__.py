"""The reusable DistributedLock contract suite, shipped as a pytest plugin.

A backend (first- or third-party) runs the same cases as ours by subclassing
`LockContract` and supplying one fixture, `lock_factory`: a picklable callable
that returns a new, independent instance, as if on a separate node::

    from functools import partial
    import pytest
    from firefly_scheduling.testing import LockContract

    class TestMyLock(LockContract):
        @pytest.fixture
        def lock_factory(self):
            return partial(MyLock, "myserver://127.0.0.1:1234")

Capabilities (`ttl_honoured`, `session_scoped`, `cross_process`, `supports_fencing`)
are read from the lock class, so each case runs only where it applies. Server
URLs come from `server_url()`.
"""

from __future__ import annotations

from firefly_scheduling.locks.port import LockCapabilities
from firefly_scheduling.testing.contract import LockContract, NoneLockContract
from firefly_scheduling.testing.provider_contract import ProviderContract
from firefly_scheduling.testing.servers import server_url

__all__ = [
    "LockCapabilities",
    "LockContract",
    "NoneLockContract",
    "ProviderContract",
    "server_url",
]
