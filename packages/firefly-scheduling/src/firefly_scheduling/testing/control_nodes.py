# Generated from control_nodes_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""Independent control store instances for the contract's cases, as if on separate nodes.

Every part of the control store contract (`control_contract_async`,
`control_races_async`) takes its instances from `stores` (and
`neighbours`) and its task from `task`, so a backend supplies its factories once.
Written once, for asyncio; `control_nodes.py` is generated from it by
`tools/async_to_sync.py`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest

from firefly_scheduling.control.store import ControlStore

StoreFactory = Callable[[], ControlStore]


class ControlStores:
    """Makes independent store instances; `close_all()` closes every one made."""

    def __init__(self, factory: StoreFactory) -> None:
        self._factory = factory
        self._made: list[ControlStore] = []

    def __call__(self) -> ControlStore:
        self._made.append(self._factory())
        return self._made[-1]

    def close_all(self) -> None:
        for store in self._made:
            store.close()


class ControlFixtures:
    """The fixtures every part of the control contract shares; a backend adds the factories."""

    @pytest.fixture
    def stores(self, control_store_factory: StoreFactory) -> Iterator[ControlStores]:
        """Independent instances, all closed after the case."""
        made = ControlStores(control_store_factory)
        yield made
        made.close_all()

    @pytest.fixture
    def neighbours(self, neighbour_store_factory: StoreFactory) -> Iterator[ControlStores]:
        made = ControlStores(neighbour_store_factory)
        yield made
        made.close_all()

    @pytest.fixture
    def task(self) -> str:
        """A task target no other case uses."""
        return f"app.control_{uuid.uuid4().hex}:job"
