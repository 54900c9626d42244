"""Independent control store instances for the contract's cases, as if on separate nodes.

Every part of the control store contract (`control_contract_async`,
`control_races_async`) takes its instances from `stores` (and
`neighbours`) and its task from `task`, so a backend supplies its factories once.
Written once, for asyncio; `control_nodes.py` is generated from it by
`tools/async_to_sync.py`.
"""

# async-to-sync: rename AsyncControlStores ControlStores
# async-to-sync: rename AsyncControlStore ControlStore
# async-to-sync: rename AsyncControlFixtures ControlFixtures

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest

from firefly_scheduling.concurrency.flavour import ASYNC  # sync: drop
from firefly_scheduling.control.store_async import AsyncControlStore

StoreFactory = Callable[[], AsyncControlStore]


class AsyncControlStores:
    """Makes independent store instances; `close_all()` closes every one made."""

    def __init__(self, factory: StoreFactory) -> None:
        self._factory = factory
        self._made: list[AsyncControlStore] = []

    def __call__(self) -> AsyncControlStore:
        self._made.append(self._factory())
        return self._made[-1]

    async def close_all(self) -> None:
        for store in self._made:
            await store.aclose()


class AsyncControlFixtures:
    """The fixtures every part of the control contract shares; a backend adds the factories."""

    pytestmark = pytest.mark.firefly_asyncio  # sync: drop

    if ASYNC:

        @pytest.fixture
        def stores(self, control_store_factory: StoreFactory) -> AsyncControlStores:
            """Independent instances, closed on the case's own event loop when it ends."""
            return AsyncControlStores(control_store_factory)

        @pytest.fixture
        def neighbours(self, neighbour_store_factory: StoreFactory) -> AsyncControlStores:
            return AsyncControlStores(neighbour_store_factory)

    else:

        @pytest.fixture
        def stores(self, control_store_factory: StoreFactory) -> Iterator[AsyncControlStores]:
            """Independent instances, all closed after the case."""
            made = AsyncControlStores(control_store_factory)
            yield made
            made.close_all()

        @pytest.fixture
        def neighbours(self, neighbour_store_factory: StoreFactory) -> Iterator[AsyncControlStores]:
            made = AsyncControlStores(neighbour_store_factory)
            yield made
            made.close_all()

    @pytest.fixture
    def task(self) -> str:
        """A task target no other case uses."""
        return f"app.control_{uuid.uuid4().hex}:job"
