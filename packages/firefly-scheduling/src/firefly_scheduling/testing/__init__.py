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

An asyncio lock subclasses `AsyncLockContract` instead, with the same fixtures plus
`sync_lock_factory` (the backend's synchronous lock, to prove the two flavours
exclude each other); its cases are coroutines, run here on a fresh event loop each
(no pytest plugin needed). Capabilities are read through `capabilities_of`, so each
case runs only where it applies. Server URLs come from `server_url()`.

A control store runs `ControlStoreContract` (`AsyncControlStoreContract`) with two
fixtures: `control_store_factory` and `neighbour_store_factory`, independent
instances on one namespace and on another of the same server.

A lease backend runs `OutageContract` on a server of its own that the cases stop and
start. A session backend runs `SessionLossContract` (`AsyncSessionLossContract`):
what its lock does when the server ends its session, given a `session_killer`.

Both lock contracts include the hostile-name cases (`HostileNamesContract`,
`AsyncHostileNamesContract`), which a backend can also run alone, on a server set
up otherwise. A backend that supplies `server_reader` (a `ServerReader`: a second
client of its server) has each hostile name's key read back on the server.
"""

from __future__ import annotations

import asyncio
import inspect

import pytest

from firefly_scheduling.locks.port import LockCapabilities
from firefly_scheduling.testing.contract import LockContract
from firefly_scheduling.testing.contract_async import AsyncLockContract
from firefly_scheduling.testing.control_contract import ControlStoreContract
from firefly_scheduling.testing.control_contract_async import AsyncControlStoreContract
from firefly_scheduling.testing.control_nodes_async import AsyncControlStores
from firefly_scheduling.testing.hostile import HostileNamesContract
from firefly_scheduling.testing.hostile_async import AsyncHostileNamesContract
from firefly_scheduling.testing.nodes_async import AsyncNodes
from firefly_scheduling.testing.none_contract import NoneLockContract
from firefly_scheduling.testing.outage_contract import OutageContract
from firefly_scheduling.testing.provider_contract import ProviderContract
from firefly_scheduling.testing.server_reader import ServerReader
from firefly_scheduling.testing.servers import server_url
from firefly_scheduling.testing.session_loss_contract import SessionLossContract
from firefly_scheduling.testing.session_loss_contract_async import AsyncSessionLossContract

__all__ = [
    "AsyncControlStoreContract",
    "AsyncHostileNamesContract",
    "AsyncLockContract",
    "AsyncSessionLossContract",
    "ControlStoreContract",
    "HostileNamesContract",
    "LockCapabilities",
    "LockContract",
    "NoneLockContract",
    "OutageContract",
    "ProviderContract",
    "ServerReader",
    "SessionLossContract",
    "server_url",
]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "firefly_asyncio: a coroutine case of the async contract, run on its own loop"
    )


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run a coroutine case of `AsyncLockContract` on a fresh event loop.

    Every instance the case made (`nodes`) is closed on that same loop: an asyncio
    client belongs to the loop it connected on.
    """
    function = pyfuncitem.obj
    if pyfuncitem.get_closest_marker("firefly_asyncio") is None or not (
        inspect.iscoroutinefunction(function)
    ):
        return None
    wanted = inspect.signature(function).parameters
    arguments = {key: value for key, value in pyfuncitem.funcargs.items() if key in wanted}

    async def case() -> None:
        try:
            await function(**arguments)
        finally:
            for value in arguments.values():
                if isinstance(value, AsyncNodes | AsyncControlStores):
                    await value.close_all()

    asyncio.run(case())
    return True
