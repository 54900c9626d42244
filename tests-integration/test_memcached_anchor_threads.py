"""`MemcachedAnchorStore` shared by many threads, on a real memcached.

It shared one pymemcache client (one socket, no mutex) between threads: 8 threads
got raw `AttributeError`s and `KeyError`s from inside pymemcache, and replies read by
the wrong thread. Every outcome here is checked against what a second client reads
from the server.
"""

from __future__ import annotations

import sys
import threading
import uuid
from pathlib import Path

from pymemcache.client.base import Client

from firefly_scheduling_memcached.anchor_store import MemcachedAnchorStore
from firefly_scheduling_memcached.url import memcached_server

sys.path.insert(0, str(Path(__file__).resolve().parent))
from threads_together import run_together

THREADS = 16
ROUNDS = 60


def test_sixteen_threads_share_one_store_without_errors_or_crossed_replies(
    memcached_url: str,
) -> None:
    store = MemcachedAnchorStore(memcached_url)
    prefix = f"firefly-test:anchors:{uuid.uuid4().hex}"
    wins: dict[int, list[int]] = {round_: [] for round_ in range(ROUNDS)}
    mutex = threading.Lock()

    def work(thread: int) -> None:
        for round_ in range(ROUNDS):
            own = f"{prefix}:own:{thread}:{round_}"
            assert store.add(own, f"{thread}.{round_}")
            assert store.get(own) == f"{thread}.{round_}"
            assert store.replace(own, f"{thread}.{round_}", f"{thread}.{round_}.b")
            assert store.get(own) == f"{thread}.{round_}.b"
            # Every thread races for the same key each round: one add wins.
            if store.add(f"{prefix}:race:{round_}", str(thread)):
                with mutex:
                    wins[round_].append(thread)

    errors = run_together(work, range(THREADS), timeout=120)
    store.close()

    assert errors == [], f"{len(errors)} errors, first: {errors[0]!r}"
    assert all(len(winners) == 1 for winners in wins.values()), wins
    reader = Client(memcached_server(memcached_url))
    try:
        for number in range(THREADS):
            for round_ in range(ROUNDS):
                value = reader.get(f"{prefix}:own:{number}:{round_}")
                assert value == f"{number}.{round_}.b".encode()
        for round_, [winner] in wins.items():
            assert reader.get(f"{prefix}:race:{round_}") == str(winner).encode()
    finally:
        reader.close()
