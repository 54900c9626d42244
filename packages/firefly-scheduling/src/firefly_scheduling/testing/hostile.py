# Generated from hostile_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
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

from __future__ import annotations

import uuid
from collections.abc import Callable, Hashable
from typing import Any

import pytest

from firefly_scheduling.locks.holding import Holding
from firefly_scheduling.locks.port import (
    BatchAcquiringLock,
    DistributedLock,
    HoldingLock,
    capabilities_of,
)
from firefly_scheduling.testing.hostile_names import generated_names, hostile_names, lookalikes
from firefly_scheduling.testing.server_reader import ServerReader

LockFactory = Callable[[], DistributedLock]
#: Names generated per case: few, so the suite stays fast (each is a full round of
#: acquisitions on the real server); a new seed every run finds new ones over time.
GENERATED_EXAMPLES = 8
TTL = 30.0


def _close(lock: object) -> None:
    close = getattr(lock, "close", None)
    if callable(close):
        close()


def _close_now(lock: object) -> None:
    """Close a synchronous lock (the peer), from a synchronous case."""
    close = getattr(lock, "close", None)
    if callable(close):
        close()


class HostileNamesContract:
    """Hostile names are exact keys and exclusive locks, read on the server where it can be.

    Subclasses provide `lock_factory` (and, asyncio, `sync_lock_factory`), and
    `server_reader` where the backend has a second client for its server.
    """

    @pytest.fixture
    def lock_factory(self) -> LockFactory:
        raise NotImplementedError("a contract subclass must provide the lock_factory fixture")

    @pytest.fixture
    def peer_factory(self, lock_factory: LockFactory) -> LockFactory:
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

    def test_hostile_names_are_exact_keys_and_exclusive_locks(
        self,
        lock_factory: LockFactory,
        peer_factory: Callable[[], DistributedLock],
        server_reader: ServerReader | None,
        unique: str,
    ) -> None:
        canary = "canary" if server_reader is None else server_reader.canary
        lock, peer = lock_factory(), peer_factory()
        try:
            for hostile in hostile_names(unique, canary=canary):
                _check_name(lock, peer, hostile.name, server_reader, hostile.attack)
        finally:
            _close(lock)
            _close(peer)

    def test_generated_names_are_exact_keys_and_exclusive_locks(
        self,
        lock_factory: LockFactory,
        peer_factory: Callable[[], DistributedLock],
        server_reader: ServerReader | None,
        unique: str,
    ) -> None:
        """`generated_names` (hypothesis), each on a fresh instance of the lock."""
        pytest.importorskip("hypothesis")
        from hypothesis import given, settings  # noqa: PLC0415 - optional, see importorskip

        peer = peer_factory()

        def fresh_lock(name: str) -> None:
            lock = lock_factory()
            try:
                _check_name(lock, peer, name, server_reader, "generated")
            finally:
                _close(lock)

        @settings(max_examples=GENERATED_EXAMPLES, deadline=None, database=None)
        @given(name=generated_names(unique))
        def check(name: str) -> None:
            fresh_lock(name)

        try:
            check()
        finally:
            _close_now(peer)


def _check_name(
    lock: DistributedLock,
    peer: DistributedLock,
    name: str,
    reader: ServerReader | None,
    attack: str,
) -> None:
    """One name, every way the contract can take it; `attack` and the name in every message."""
    where = f"{attack} name {name!r}"
    server = _ServerView(reader, name)
    assert lock.try_acquire(name, TTL), f"the {where} could not be acquired"
    try:
        assert peer.try_acquire(name, TTL) is False, f"the {where} was held twice"
        server.holds_exactly_its_key(where)
        for lookalike in lookalikes(name):
            assert peer.try_acquire(lookalike, TTL), (
                f"the {where} and its lookalike {lookalike!r} were one lock"
            )
            peer.release(lookalike)
    finally:
        lock.release(name)
    server.holds_none(where)
    assert peer.try_acquire(name, TTL), f"the {where} was not freed by its release"
    try:
        assert lock.try_acquire(name, TTL) is False, f"the {where} was held twice"
        server.holds_exactly_its_key(where)
    finally:
        peer.release(name)
    server.holds_none(where)
    if capabilities_of(lock).fenced:
        _check_fenced(lock, peer, name, where, server)
    if isinstance(lock, BatchAcquiringLock) and isinstance(lock, HoldingLock):
        _check_batch(lock, peer, name, where, reader)
    server.nothing_else_changed(where)


def _check_fenced(
    lock: DistributedLock, peer: DistributedLock, name: str, where: str, server: _ServerView
) -> None:
    fenced: Any = lock
    token = fenced.try_acquire_fenced(name, TTL)
    assert isinstance(token, int), f"the {where} got no fencing token: {token!r}"
    try:
        assert peer.try_acquire(name, TTL) is False, f"the fenced {where} was held twice"
        server.holds_exactly_its_key(where)
    finally:
        lock.release(name)
    server.holds_none(where)


def _check_batch(
    lock: Any, peer: DistributedLock, name: str, where: str, reader: ServerReader | None
) -> None:
    """`name` and a sibling taken in one batch, released together."""
    names = [name, _sibling(name)]
    server = _ServerView(reader, *names)
    holdings = lock.acquire_many([(each, TTL) for each in names])
    assert all(isinstance(holding, Holding) for holding in holdings), (
        f"the {where} was not taken in a batch: {holdings!r}"
    )
    try:
        for each in names:
            assert peer.try_acquire(each, TTL) is False, f"{each!r} was held twice"
        server.holds_exactly_its_key(where)
    finally:
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
