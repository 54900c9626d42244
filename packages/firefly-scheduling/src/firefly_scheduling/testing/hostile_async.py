"""The hostile-name cases of the lock contract, written once for both flavours.

Written once, for asyncio, in `testing/hostile_async.py`; the synchronous cases in
`testing/hostile.py` are generated from it by `tools/async_to_sync.py`. Both lock
contracts include them, and a backend can also run them alone (a class subclassing
only this one), for instance on a server whose session settings change how text is
read.

Each name (the fixed `hostile_names`, and a few `generated_names` by hypothesis) is
taken by one node and refused to another, both ways round: in the asyncio contract
the other node is the backend's synchronous lock (`sync_lock_factory`), so the two
flavours must agree on the name's key; in the synchronous one it is a second
instance. The names a wrong escaping would turn it into (`lookalikes`) stay free
while it is held. Where the backend has them, several names are taken in one
batch and released together, and a fenced acquisition writes the name's counter.

With a `server_reader` (a second client of the server, `ServerReader`), each step is
also read on the server: exactly the key the backend documents for the name is held
while a node holds it and none after, and nothing outside the lock's keys changed
(the canary stands). Without one the cases prove exclusion alone.
"""

# async-to-sync: rename AsyncPeer DistributedLock

from __future__ import annotations

import asyncio  # sync: drop
import uuid
from collections.abc import Callable, Hashable
from typing import Any

import pytest

from firefly_scheduling.concurrency.flavour import ASYNC  # sync: drop
from firefly_scheduling.locks.holding import Holding
from firefly_scheduling.locks.port import (
    AsyncBatchAcquiringLock,
    AsyncDistributedLock,
    AsyncHoldingLock,
    DistributedLock,
    capabilities_of,
)
from firefly_scheduling.testing.hostile_names import generated_names, hostile_names, lookalikes
from firefly_scheduling.testing.server_reader import ServerReader

AsyncLockFactory = Callable[[], AsyncDistributedLock]
#: Names generated per case: few, so the suite stays fast (each is a full round of
#: acquisitions on the real server); a new seed every run finds new ones over time.
GENERATED_EXAMPLES = 8
TTL = 30.0

if ASYNC:

    class AsyncPeer:
        """The backend's synchronous lock, driven from threads: the other flavour."""

        def __init__(self, lock: DistributedLock) -> None:
            self.lock = lock

        async def try_acquire(self, name: str, ttl_seconds: float) -> bool:
            return await asyncio.to_thread(self.lock.try_acquire, name, ttl_seconds)

        async def release(self, name: str) -> None:
            await asyncio.to_thread(self.lock.release, name)

        def close(self) -> None:
            close = getattr(self.lock, "close", None)
            if callable(close):
                close()


async def _close(lock: object) -> None:
    if ASYNC:
        aclose = getattr(lock, "aclose", None)
        if callable(aclose):
            await aclose()
            return
    close = getattr(lock, "close", None)
    if callable(close):
        close()


def _close_now(lock: object) -> None:
    """Close a synchronous lock (the peer), from a synchronous case."""
    close = getattr(lock, "close", None)
    if callable(close):
        close()


class AsyncHostileNamesContract:
    """Hostile names are exact keys and exclusive locks, read on the server where it can be.

    Subclasses provide `lock_factory` (and, asyncio, `sync_lock_factory`), and
    `server_reader` where the backend has a second client for its server.
    """

    pytestmark = pytest.mark.firefly_asyncio  # sync: drop

    @pytest.fixture
    def lock_factory(self) -> AsyncLockFactory:
        raise NotImplementedError("a contract subclass must provide the lock_factory fixture")

    if ASYNC:

        @pytest.fixture
        def sync_lock_factory(self) -> Callable[[], DistributedLock]:
            raise NotImplementedError(
                "an async contract subclass must provide sync_lock_factory, the same "
                "backend's synchronous lock, to prove the two flavours exclude each other"
            )

        @pytest.fixture
        def peer_factory(
            self, sync_lock_factory: Callable[[], DistributedLock]
        ) -> Callable[[], AsyncPeer]:
            """The node each name is raced against: the synchronous flavour."""
            return lambda: AsyncPeer(sync_lock_factory())

    else:

        @pytest.fixture
        def peer_factory(self, lock_factory: AsyncLockFactory) -> AsyncLockFactory:
            """The node each name is raced against: a second instance."""
            return lock_factory

    @pytest.fixture
    def server_reader(self) -> ServerReader | None:
        """A second client of the lock's server (`ServerReader`), or None: exclusion only."""
        return None

    @pytest.fixture
    def unique(self) -> str:
        """A token no other run's names carry, so runs sharing a server never meet."""
        return uuid.uuid4().hex[:10]

    async def test_hostile_names_are_exact_keys_and_exclusive_locks(
        self,
        lock_factory: AsyncLockFactory,
        peer_factory: Callable[[], AsyncPeer],
        server_reader: ServerReader | None,
        unique: str,
    ) -> None:
        canary = "canary" if server_reader is None else server_reader.canary
        lock, peer = lock_factory(), peer_factory()
        try:
            for hostile in hostile_names(unique, canary=canary):
                await _check_name(lock, peer, hostile.name, server_reader, hostile.attack)
        finally:
            await _close(lock)
            await _close(peer)

    def test_generated_names_are_exact_keys_and_exclusive_locks(
        self,
        lock_factory: AsyncLockFactory,
        peer_factory: Callable[[], AsyncPeer],
        server_reader: ServerReader | None,
        unique: str,
    ) -> None:
        """`generated_names` (hypothesis), each on a fresh instance of the lock."""
        pytest.importorskip("hypothesis")
        from hypothesis import given, settings  # noqa: PLC0415 - optional, see importorskip

        peer = peer_factory()

        async def fresh_lock(name: str) -> None:
            lock = lock_factory()
            try:
                await _check_name(lock, peer, name, server_reader, "generated")
            finally:
                await _close(lock)

        @settings(max_examples=GENERATED_EXAMPLES, deadline=None, database=None)
        @given(name=generated_names(unique))
        def check(name: str) -> None:
            asyncio.run(fresh_lock(name))  # sync: fresh_lock(name)

        try:
            check()
        finally:
            _close_now(peer)


async def _check_name(
    lock: AsyncDistributedLock,
    peer: AsyncPeer,
    name: str,
    reader: ServerReader | None,
    attack: str,
) -> None:
    """One name, every way the contract can take it; `attack` and the name in every message."""
    where = f"{attack} name {name!r}"
    server = _ServerView(reader, name)
    assert await lock.try_acquire(name, TTL), f"the {where} could not be acquired"
    try:
        assert await peer.try_acquire(name, TTL) is False, f"the {where} was held twice"
        server.holds_exactly_its_key(where)
        for lookalike in lookalikes(name):
            assert await peer.try_acquire(lookalike, TTL), (
                f"the {where} and its lookalike {lookalike!r} were one lock"
            )
            await peer.release(lookalike)
    finally:
        await lock.release(name)
    server.holds_none(where)
    assert await peer.try_acquire(name, TTL), f"the {where} was not freed by its release"
    try:
        assert await lock.try_acquire(name, TTL) is False, f"the {where} was held twice"
        server.holds_exactly_its_key(where)
    finally:
        await peer.release(name)
    server.holds_none(where)
    if capabilities_of(lock).fenced:
        await _check_fenced(lock, peer, name, where, server)
    if isinstance(lock, AsyncBatchAcquiringLock) and isinstance(lock, AsyncHoldingLock):
        await _check_batch(lock, peer, name, where, reader)
    server.nothing_else_changed(where)


async def _check_fenced(
    lock: AsyncDistributedLock, peer: AsyncPeer, name: str, where: str, server: _ServerView
) -> None:
    fenced: Any = lock
    token = await fenced.try_acquire_fenced(name, TTL)
    assert isinstance(token, int), f"the {where} got no fencing token: {token!r}"
    try:
        assert await peer.try_acquire(name, TTL) is False, f"the fenced {where} was held twice"
        server.holds_exactly_its_key(where)
    finally:
        await lock.release(name)
    server.holds_none(where)


async def _check_batch(
    lock: Any, peer: AsyncPeer, name: str, where: str, reader: ServerReader | None
) -> None:
    """`name` and a sibling taken in one batch, released together."""
    names = [name, _sibling(name)]
    server = _ServerView(reader, *names)
    holdings = await lock.acquire_many([(each, TTL) for each in names])
    assert all(isinstance(holding, Holding) for holding in holdings), (
        f"the {where} was not taken in a batch: {holdings!r}"
    )
    try:
        for each in names:
            assert await peer.try_acquire(each, TTL) is False, f"{each!r} was held twice"
        server.holds_exactly_its_key(where)
    finally:
        if ASYNC:  # released together: a backend may send them as one statement
            await asyncio.gather(*(lock.release_holding(holding) for holding in holdings))
        else:
            for holding in holdings:
                lock.release_holding(holding)
    server.holds_none(where)


def _sibling(name: str) -> str:
    """Another name close to `name`: its first lookalike, else its last character changed."""
    for lookalike in lookalikes(name):
        return lookalike
    return name[:-1] + ("'" if name[-1] != "'" else '"')


class _ServerView:
    """What a `ServerReader` says about some names, against what it said at the start."""

    def __init__(self, reader: ServerReader | None, *names: str) -> None:
        self._reader = reader
        if reader is None:
            return
        self._keys = {reader.key(name) for name in names}
        others = {reader.key(other) for name in names for other in lookalikes(name)}
        self._candidates: list[Hashable] = [*self._keys, *(others - self._keys)]
        self._baseline = reader.held(self._candidates)
        self._fingerprint = reader.fingerprint()
        for key in self._keys:
            assert key not in self._baseline, f"key {key!r} was held before the case began"

    def holds_exactly_its_key(self, where: str) -> None:
        if self._reader is None:
            return
        held = self._reader.held(self._candidates)
        assert held - self._baseline == self._keys, (
            f"for the {where} the server holds {sorted(map(repr, held - self._baseline))}, "
            f"not exactly {sorted(map(repr, self._keys))}"
        )
        self._others_kept(held, where)

    def holds_none(self, where: str) -> None:
        if self._reader is None:
            return
        held = self._reader.held(self._candidates)
        assert not held - self._baseline, (
            f"after the {where} was released the server still holds "
            f"{sorted(map(repr, held - self._baseline))}"
        )
        self._others_kept(held, where)

    def _others_kept(self, held: frozenset[Hashable], where: str) -> None:
        """The candidate keys held before the case (another test's) are held still."""
        before = self._baseline & set(self._candidates)
        assert before <= held, (
            f"the {where} freed {sorted(map(repr, before - held))}, which it never held"
        )

    def nothing_else_changed(self, where: str) -> None:
        if self._reader is None:
            return
        assert self._reader.fingerprint() == self._fingerprint, (
            f"the {where} changed what the server holds outside the lock's keys"
        )
