"""A forked child starts with none of its parent's holdings, and never deadlocks on them.

Real `os.fork()`s: the child reports through a pipe what it sees. The async flavour
shares the same `HoldingLedger`, so the asyncio memory lock is checked too.
"""

from __future__ import annotations

import asyncio
import json
import os
import select
import threading
import uuid
from collections.abc import Callable
from typing import Any

from firefly_scheduling.aio import AsyncInMemoryLock
from firefly_scheduling.locks import InMemoryLock


def in_forked_child(work: Callable[[], dict[str, Any]], seconds: float = 20.0) -> dict[str, Any]:
    """`work()`'s result from a forked child; fails when the child hangs."""
    reading, writing = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(reading)
        try:
            result = work()
        except BaseException as err:  # noqa: BLE001 - reported to the parent
            result = {"error": f"{type(err).__name__}: {err}"}
        os.write(writing, json.dumps(result).encode())
        os._exit(0)
    os.close(writing)
    try:
        ready, _, _ = select.select([reading], [], [], seconds)
        if not ready:
            os.kill(pid, 9)
        assert ready, "the forked child hung"
        data = os.read(reading, 65536)
    finally:
        os.close(reading)
        os.waitpid(pid, 0)
    return dict(json.loads(data))


def test_a_child_does_not_hold_its_parents_locks() -> None:
    lock = InMemoryLock()
    name = f"fork-{uuid.uuid4().hex}"
    holding = lock.acquire(name, 30)
    assert holding is not None

    def child() -> dict[str, Any]:
        return {
            "held": lock.is_held(name),
            "valid": holding.valid,
            "renewed": lock.renew_holding(holding, 30),
        }

    assert in_forked_child(child) == {"held": False, "valid": False, "renewed": False}
    assert lock.is_held(name)
    assert holding.valid
    lock.release_holding(holding)


def test_a_child_forked_while_a_thread_held_the_ledger_mutex_does_not_deadlock() -> None:
    lock = InMemoryLock()
    ledger_mutex: threading.Lock = lock._ledger._mutex  # the state a thread may hold at a fork
    taken, release = threading.Event(), threading.Event()

    def hold_the_mutex() -> None:
        with ledger_mutex:
            taken.set()
            release.wait(30)

    thread = threading.Thread(target=hold_the_mutex)
    thread.start()
    taken.wait(5)
    try:
        name = f"fork-{uuid.uuid4().hex}"
        seen = in_forked_child(lambda: {"acquired": lock.try_acquire(name, 30)})
    finally:
        release.set()
        thread.join(10)
    assert seen == {"acquired": True}


def test_the_asyncio_flavour_shares_the_reset() -> None:
    lock = AsyncInMemoryLock()
    name = f"fork-{uuid.uuid4().hex}"
    assert asyncio.run(lock.try_acquire(name, 30))

    def child() -> dict[str, Any]:
        return {"held": lock.is_held(name)}

    assert in_forked_child(child) == {"held": False}
    assert lock.is_held(name)


def test_a_child_keeps_its_own_holdings_alive_with_a_renewer_of_its_own() -> None:
    """The parent's renewer thread does not survive the fork: the child's keep-alive
    must start one of its own, or its lease lapses while its block runs."""
    from firefly_scheduling.locks.hold import hold  # noqa: PLC0415
    from firefly_scheduling.locks.keepalive import Renewer  # noqa: PLC0415

    lock = InMemoryLock()
    with hold(lock, f"fork-{uuid.uuid4().hex}", 0.3, keep_alive=True) as parents:
        assert parents
        parent_renewer = id(Renewer.shared())

    def child() -> dict[str, Any]:
        name = f"fork-{uuid.uuid4().hex}"
        with hold(lock, name, 0.3, keep_alive=True) as held:
            threading.Event().wait(1.2)  # four TTLs
            kept = lock.is_held(name) and not held.lost
        return {"kept": kept, "own_renewer": id(Renewer.shared()) != parent_renewer}

    assert in_forked_child(child) == {"kept": True, "own_renewer": True}
