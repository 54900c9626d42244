"""A Redis lock's batches on a real 3-master Redis Cluster: one pipeline per primary.

`acquire_many` and `try_claim_many` group their commands by the primary that owns
each key's slot and send each group as a plain pipeline on that primary's own
connection (`firefly_scheduling_redis.primaries`). These tests check, with a second
client reading the servers, that each command is answered on its own; that a
command refused unrun (MOVED after a slot moved, ASK while it moves) is sent again
through the cluster client and wins where the slot now is, its fencing counter
moving with it; and that a primary that stops answering leaves only its own
acquisitions unknown, sent once, never reported lost.

The slot moves use `CLUSTER SETSLOT` and `MIGRATE` on one slot of the test's own
names, and put it back where it was.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any

import pytest
import redis
import redis.asyncio
from redis.crc import key_slot

from firefly_scheduling.errors import LockBackendError
from firefly_scheduling.locks.holding import Holding
from firefly_scheduling_redis import AsyncRedisLock, RedisLock, protocol
from firefly_scheduling_redis.primaries import send_by_primary
from firefly_scheduling_redis.url import parse_url

#: Counts or changes what the whole server does: runs alone under xdist.
pytestmark = pytest.mark.alone

Answers = list[Holding | LockBackendError | None]
#: Acquire a batch fenced through a fresh lock of one flavour, and release what it won.
Batch = Callable[[Sequence[str]], Answers]


@pytest.fixture
def cluster(redis_cluster_url: str) -> Iterator[redis.cluster.RedisCluster]:
    client = redis.cluster.RedisCluster.from_url(parse_url(redis_cluster_url).driver_url)
    yield client
    client.close()


class Primaries:
    """A plain client on each primary, by node name, to read and move slots directly."""

    def __init__(self, cluster: redis.cluster.RedisCluster) -> None:
        nodes = cluster.get_primaries()  # type: ignore[no-untyped-call]
        self.clients: dict[str, redis.Redis] = {
            node.name: redis.Redis(host=node.host, port=node.port) for node in nodes
        }
        self.ids = {
            name: _command(client, "CLUSTER MYID").decode() for name, client in self.clients.items()
        }

    def owner(self, key: bytes) -> str:
        """The name of the primary that owns `key`'s slot, asked of the cluster now."""
        slots = _command(next(iter(self.clients.values())), "CLUSTER SLOTS")
        slot = key_slot(key)
        for first, last, primary, *_ in slots:
            if first <= slot <= last:
                return f"{primary[0].decode()}:{primary[1]}"
        raise AssertionError(f"slot {slot} has no primary")

    def other_than(self, name: str) -> str:
        return next(node for node in self.clients if node != name)

    def close(self) -> None:
        for client in self.clients.values():
            client.close()

    @contextmanager
    def moved(self, slot: int, source: str, target: str) -> Iterator[None]:
        """`slot` and its keys on `target` while the block runs, then back on `source`."""
        self._move(slot, source, target)
        try:
            yield
        finally:
            self._move(slot, target, source)

    @contextmanager
    def migrating(self, slot: int, source: str, target: str) -> Iterator[None]:
        """`slot` half-way from `source` to `target` (MIGRATING / IMPORTING): a command
        on a key `source` does not have is answered ASK. Afterwards the keys the block
        wrote on `target` are deleted and the slot is stable on `source` again."""
        _command(self.clients[target], "CLUSTER SETSLOT", slot, "IMPORTING", self.ids[source])
        _command(self.clients[source], "CLUSTER SETSLOT", slot, "MIGRATING", self.ids[target])
        try:
            yield
        finally:
            keys = _command(self.clients[target], "CLUSTER GETKEYSINSLOT", slot, 1000)
            if keys:
                _asking(self.clients[target], "DEL", *keys)
            for name in (source, target):
                _command(self.clients[name], "CLUSTER SETSLOT", slot, "STABLE")

    def asking_get(self, name: str, key: bytes) -> Any:
        """GET on a node that imports `key`'s slot (ASKING first, on the same connection)."""
        return _asking(self.clients[name], "GET", key)

    def _move(self, slot: int, source: str, target: str) -> None:
        into, out_of = self.clients[target], self.clients[source]
        _command(into, "CLUSTER SETSLOT", slot, "IMPORTING", self.ids[source])
        _command(out_of, "CLUSTER SETSLOT", slot, "MIGRATING", self.ids[target])
        keys = _command(out_of, "CLUSTER GETKEYSINSLOT", slot, 1000)
        if keys:
            host, port = target.rsplit(":", 1)
            _command(out_of, "MIGRATE", host, int(port), "", 0, 5000, "KEYS", *keys)
        for name in (target, source, *(n for n in self.clients if n not in (source, target))):
            _command(self.clients[name], "CLUSTER SETSLOT", slot, "NODE", self.ids[target])


def _command(client: redis.Redis, *args: Any) -> Any:
    return client.execute_command(*args)  # type: ignore[no-untyped-call]


def _asking(client: redis.Redis, *args: Any) -> Any:
    """`args` on a primary that imports their key's slot: ASKING first, on one connection."""
    pipeline = client.pipeline(transaction=False)
    pipeline.execute_command("ASKING")  # type: ignore[no-untyped-call]
    pipeline.execute_command(*args)  # type: ignore[no-untyped-call]
    return pipeline.execute()[1]


@pytest.fixture
def primaries(cluster: redis.cluster.RedisCluster) -> Iterator[Primaries]:
    nodes = Primaries(cluster)
    yield nodes
    nodes.close()


def _names(count: int) -> list[str]:
    run = uuid.uuid4().hex
    return [f"batch-{run}-{n}" for n in range(count)]


def _key(name: str) -> bytes:
    return protocol.lock_key(name, cluster=True)


def _fence(name: str) -> bytes:
    return protocol.fence_key(name, cluster=True)


@pytest.fixture(params=["sync", "asyncio"])
def flavour(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _each_flavour(
    flavour: str,
    url: str,
    names: Sequence[str],
    *,
    before: Callable[[Any], None] | None = None,
    held: Callable[[Answers], None] | None = None,
    fenced: bool = True,
) -> Answers:
    """`acquire_many(names)` on a fresh lock of `flavour`, whose client has read the slot
    map first (its first call); `before(lock)` runs between the two. What it won, it
    releases, after `held(answers)`."""
    ttl = 30.0
    warm = f"warm-{uuid.uuid4().hex}"
    if flavour == "sync":
        lock = RedisLock(url)
        try:
            assert lock.try_acquire(warm, ttl)
            if before is not None:
                before(lock)
            answers = lock.acquire_many([(name, ttl) for name in names], fenced=fenced)
            if held is not None:
                held(answers)
            for answer in answers:
                if isinstance(answer, Holding):
                    lock.release_holding(answer)
            return answers
        finally:
            lock.close()

    async def run() -> Answers:
        alock = AsyncRedisLock(url)
        try:
            assert await alock.try_acquire(warm, ttl)
            if before is not None:
                before(alock)
            answers = await alock.acquire_many([(name, ttl) for name in names], fenced=fenced)
            if held is not None:
                held(answers)
            for answer in answers:
                if isinstance(answer, Holding):
                    await alock.release_holding(answer)
            return answers
        finally:
            await alock.aclose()

    return asyncio.run(run())


def test_a_batch_over_every_primary_is_answered_name_by_name(
    redis_cluster_url: str,
    cluster: redis.cluster.RedisCluster,
    primaries: Primaries,
    flavour: str,
) -> None:
    names = _names(12)
    assert len({primaries.owner(_key(name)) for name in names}) == 3, "not on every primary"
    held, seen_before = names[0], names[1]
    other = RedisLock(redis_cluster_url)
    read_while_held: dict[str, tuple[Any, Any]] = {}
    expected: dict[str, tuple[bytes, bytes]] = {}

    def read(answers: Answers) -> None:
        """A second client reads each name while the batch's lock holds what it won."""
        for name, answer in zip(names, answers, strict=True):
            read_while_held[name] = (cluster.get(_key(name)), cluster.get(_fence(name)))
            if isinstance(answer, Holding):
                expected[name] = (answer.owner.encode(), str(answer.fence).encode())

    try:
        assert other.try_acquire_fenced(held, 30) == 1  # another owner holds it
        assert other.try_acquire_fenced(seen_before, 30) == 1
        other.release(seen_before)
        answers = _each_flavour(flavour, redis_cluster_url, names, held=read)
        assert answers[0] is None, "held by another owner: lost, and only that one"
        won = [answer for answer in answers[1:] if isinstance(answer, Holding)]
        assert [holding.name for holding in won] == names[1:], answers
        assert [holding.fence for holding in won] == [2] + [1] * (len(names) - 2)
        assert {name: read_while_held[name] for name in names[1:]} == expected
        assert read_while_held[held][1] == b"1", "a lost acquisition consumed a token"
        assert cluster.get(_key(held)) == read_while_held[held][0], "the holder's lock changed"
        # Released by the batch's lock: the keys are gone, the counters stay.
        assert all(cluster.exists(_key(name)) == 0 for name in names[1:])
    finally:
        other.release(held)
        other.close()


def test_claims_of_a_batch_are_answered_one_by_one(
    redis_cluster_url: str, cluster: redis.cluster.RedisCluster
) -> None:
    names = _names(9)
    lock, other = RedisLock(redis_cluster_url), RedisLock(redis_cluster_url)
    try:
        assert other.try_claim(names[4], 30)
        answers = lock.try_claim_many([(name, 30) for name in names] + [(names[0], 30)])
        assert answers == [True] * 4 + [False] + [True] * 4 + [False]
        assert all(0 < cluster.pttl(_key(name)) <= 30_000 for name in names)
    finally:
        lock.close()
        other.close()
        cluster.delete(*(_key(name) for name in names))


def test_one_refused_command_in_a_primarys_pipeline_leaves_the_others_answered(
    cluster: redis.cluster.RedisCluster, primaries: Primaries
) -> None:
    """NOSCRIPT for one command (an unknown script) is its own answer, and is `NOT_RUN`."""
    names = _names(12)
    target = primaries.owner(_key(names[0]))
    same_node = [name for name in names if primaries.owner(_key(name)) == target]
    assert len(same_node) >= 2
    first, second = same_node[:2]
    unknown = protocol.Command(_key(first), ("EVALSHA", "0" * 40, 1, _key(first)))
    commands = [
        protocol.acquisition(first, "owner-a", 30, fenced=False, cluster=True),
        unknown,
        protocol.acquisition(second, "owner-b", 30, fenced=True, cluster=True),
        protocol.acquisition(first, "owner-c", 30, fenced=False, cluster=True),
    ]
    cluster.script_load(protocol.ACQUIRE_FENCED.source)
    try:
        replies = send_by_primary(cluster, commands)
        assert replies[0] is True
        assert isinstance(replies[1], protocol.NOT_RUN)
        assert replies[2] == 1
        assert replies[3] is None  # taken by the first: one holder
        assert cluster.get(_key(first)) == b"owner-a"
        assert cluster.get(_key(second)) == b"owner-b"
    finally:
        cluster.delete(_key(first), _key(second))


def test_a_primary_that_forgot_the_script_answers_noscript_and_the_batch_still_wins(
    redis_cluster_url: str, primaries: Primaries, flavour: str
) -> None:
    """SCRIPT FLUSH on one primary after the lock's first call: its part of the batch is
    refused unrun (NOSCRIPT) and sent again once the script is loaded."""
    names = _names(12)
    flushed = primaries.owner(_key(names[0]))

    def flush(lock: Any) -> None:
        del lock
        _command(primaries.clients[flushed], "SCRIPT", "FLUSH")

    answers = _each_flavour(flavour, redis_cluster_url, names, before=flush)
    assert all(isinstance(answer, Holding) and answer.fence == 1 for answer in answers), answers


def test_a_batch_with_a_stale_slot_map_follows_the_moved_slot_and_its_counter(
    redis_cluster_url: str,
    cluster: redis.cluster.RedisCluster,
    primaries: Primaries,
    flavour: str,
) -> None:
    """The lock's client still maps the slot to its old primary, which answers MOVED."""
    names = _names(6)
    moving = names[0]
    slot = key_slot(_key(moving))
    source = primaries.owner(_key(moving))
    target = primaries.other_than(source)
    other = RedisLock(redis_cluster_url)
    try:
        assert other.try_acquire_fenced(moving, 30) == 1
        other.release(moving)
    finally:
        other.close()
    stale: list[str] = []
    with ExitStack() as stack:

        def move_under(lock: Any) -> None:
            """The lock has read the slot map (its first call): move the slot under it."""
            stale.append(lock._client.get_node_from_key(_key(moving)).name)
            stack.enter_context(primaries.moved(slot, source, target))

        answers = _each_flavour(flavour, redis_cluster_url, names, before=move_under)
        assert stale == [source], "the lock's map was not stale: no MOVED was met"
        assert primaries.owner(_key(moving)) == target
        won = answers[0]
        assert isinstance(won, Holding), answers
        assert won.fence == 2, "the counter moved with its slot and went on from 1"
        assert primaries.clients[target].get(_fence(moving)) == b"2"
        assert primaries.clients[target].exists(_key(moving)) == 0, "released where it was won"
        assert all(isinstance(answer, Holding) and answer.fence == 1 for answer in answers[1:])


def test_a_batch_meeting_a_slot_being_migrated_follows_ask(
    redis_cluster_url: str, primaries: Primaries, flavour: str
) -> None:
    """A fresh name in a MIGRATING slot: the old primary answers ASK, the new one runs
    it. (Fenced, the script's two keys are both missing on both primaries, which
    Redis answers TRYAGAIN until the move ends: an error, as for a single call.)"""
    names = _names(6)
    moving = names[0]
    slot = key_slot(_key(moving))
    source = primaries.owner(_key(moving))
    target = primaries.other_than(source)
    seen: list[Any] = []

    def read_both(answers: Answers) -> None:
        seen.append(primaries.asking_get(target, _key(moving)))
        seen.append(_command(primaries.clients[source], "CLUSTER GETKEYSINSLOT", slot, 1000))

    with primaries.migrating(slot, source, target):
        answers = _each_flavour(flavour, redis_cluster_url, names, held=read_both, fenced=False)
        fenced = _each_flavour(flavour, redis_cluster_url, [moving, names[1]])
    won = answers[0]
    assert isinstance(won, Holding), answers
    assert all(isinstance(answer, Holding) for answer in answers), answers
    on_target, on_source = seen
    assert on_target == won.owner.encode(), "the importing primary holds the lock"
    assert _key(moving) not in on_source, "an acquisition ran on the old primary"
    assert isinstance(fenced[0], LockBackendError), fenced
    assert "TTL exhausted" in str(fenced[0])
    assert isinstance(fenced[1], Holding), fenced


def test_a_primary_that_stops_answering_leaves_only_its_acquisitions_unknown(
    redis_cluster_url: str, primaries: Primaries, flavour: str
) -> None:
    """CLIENT PAUSE (writes) on one primary past the socket timeout: its acquisitions
    fail with the connection's error (their outcome is unknown to the client), the
    other primaries' win. (The local server drops a paused command whose client went
    away, so a reply lost after the command ran cannot be provoked here.)"""
    names = _names(12)
    paused = primaries.owner(_key(names[0]))
    on_paused = [name for name in names if primaries.owner(_key(name)) == paused]
    pause_ms = 1500

    def pause(lock: Any) -> None:
        del lock
        _command(primaries.clients[paused], "CLIENT PAUSE", pause_ms, "WRITE")

    started = time.monotonic()
    try:
        answers = _each_flavour(
            flavour, f"{redis_cluster_url}?socket_timeout=0.5", names, before=pause
        )
    finally:
        time.sleep(max(0.0, started + pause_ms / 1000 + 0.1 - time.monotonic()))
    for name, answer in zip(names, answers, strict=True):
        if name in on_paused:
            assert isinstance(answer, LockBackendError), (name, answer)
            assert "TimeoutError" in str(answer) or "ConnectionError" in str(answer), answer
        else:
            assert isinstance(answer, Holding), (name, answer)


def test_the_primaries_connections_are_never_retried_by_redis_py(
    redis_cluster_url: str, flavour: str
) -> None:
    """A batch's pipeline is sent once: redis-py builds every node's connections with no
    retries, whatever the cluster client's own (checked here on the installed version)."""
    if flavour == "sync":
        lock = RedisLock(redis_cluster_url)
        try:
            lock.try_acquire(f"warm-{uuid.uuid4().hex}", 1)
            client = lock._client
            assert isinstance(client, redis.cluster.RedisCluster)
            nodes = client.get_primaries()  # type: ignore[no-untyped-call]
            for node in nodes:
                node_client = client.get_redis_connection(node)
                assert node_client.get_retry().get_retries() == 0  # type: ignore[union-attr]
        finally:
            lock.close()
        return

    async def run() -> list[int]:
        alock = AsyncRedisLock(redis_cluster_url)
        try:
            await alock.try_acquire(f"warm-{uuid.uuid4().hex}", 1)
            client = alock._client
            assert isinstance(client, redis.asyncio.RedisCluster)
            retries = []
            for node in client.get_primaries():
                connection = node.acquire_connection()
                retries.append(connection.retry.get_retries())
                node.release(connection)
            return retries
        finally:
            await alock.aclose()

    assert asyncio.run(run()) == [0, 0, 0]
