"""Round trips to the lock server per fire, on every network backend: a counting proxy.

Each node's lock talks to its server through a local TCP proxy that counts the
client's TURNS: a burst of bytes from the client that follows bytes from the
server (or opens the connection). That is exactly a round trip: a client that
pipelines two commands in one write pays one turn, a client that waits for a reply
before its next statement pays one per statement, whatever the protocol. Connection
set-up is excluded (every lock is warmed up first). Only the lock's traffic goes
through the proxy: the run history is off, so its statements are not counted.

Per backend it reports, averaged over `--fires` fires:

* `lose`: a node whose claim finds the fire taken (`FireRunner.run`);
* `run`: the node that claims the fire, takes the task lock fenced and releases it;
* `deferred`: round trips sent later for a fire, when the node closes (0 on every
  backend since claims outlive their claimer: leases expire, and PostgreSQL and MySQL
  claims are rows with a server-clock expiry);
* `guard run / lose`: the plain lock guard (`run_guarded`) for comparison.

Servers come from the `FIREFLY_TEST_*_URL` variables (defaults: the local servers).

    uv run python benchmarks/round_trips.py [--fires 20] [--backend redis ...]
"""

from __future__ import annotations

import argparse
import os
import selectors
import socket
import statistics
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from benchmark_results import Run, Table, add_arguments, servers_of, shorten
from firefly_scheduling.fires.outcome import Fire, Verdict
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.locks.guard import run_guarded
from firefly_scheduling.locks.providers import resolve_lock
from firefly_scheduling.settings import Settings
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor

_R = TypeVar("_R")


def server_url(backend: str, default: str) -> str:
    return os.environ.get(f"FIREFLY_TEST_{backend.upper()}_URL", default)


URLS = {
    "postgres": server_url("postgres", "postgresql://postgres@127.0.0.1:5432/test"),
    "mysql": server_url("mysql", "mysql://root@127.0.0.1:3306/test"),
    "redis": server_url("redis", "redis://127.0.0.1:6379/0"),
    "memcached": server_url("memcached", "memcached://127.0.0.1:11211"),
    "etcd": server_url("etcd", "etcd://127.0.0.1:2379"),
}
#: backend -> (lock provider, server whose URL it uses)
BACKENDS = {
    "redis": ("redis", "redis"),
    "postgres": ("postgres", "postgres"),
    "mysql": ("mysql", "mysql"),
    "memcached": ("memcached", "memcached"),
    "etcd": ("etcd", "etcd"),
    "database-postgres": ("database", "postgres"),
    "database-mariadb": ("database", "mysql"),
}


class CountingProxy:
    """Forwards every connection to `upstream` and counts client turns (see the module doc)."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self._upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.setblocking(False)
        self.port: int = self._listener.getsockname()[1]
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ, None)
        self._mutex = threading.Lock()
        self._turns = 0
        self._stop = False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def turns(self) -> int:
        with self._mutex:
            return self._turns

    def close(self) -> None:
        self._stop = True
        self._thread.join(timeout=5)
        self._listener.close()

    def _serve(self) -> None:
        # peer socket -> (the other socket, "client"/"server", the connection's last sender)
        routes: dict[socket.socket, tuple[socket.socket, str, list[str]]] = {}
        while not self._stop:
            for key, _ in self._selector.select(timeout=0.1):
                sock: socket.socket = key.fileobj  # type: ignore[assignment]
                if sock is self._listener:
                    client, _ = self._listener.accept()
                    server = socket.create_connection(self._upstream)
                    for end in (client, server):
                        end.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                        self._selector.register(end, selectors.EVENT_READ, None)
                    last = [""]
                    routes[client] = (server, "client", last)
                    routes[server] = (client, "server", last)
                    continue
                if sock not in routes:  # closed with its peer earlier in this batch
                    continue
                other, side, last = routes[sock]
                try:
                    data = sock.recv(65536)
                except OSError:
                    data = b""
                if not data:
                    for end in (sock, other):
                        self._selector.unregister(end)
                        routes.pop(end, None)
                        end.close()
                    continue
                if side == "client" and last[0] != "client":
                    with self._mutex:
                        self._turns += 1
                last[0] = side
                other.sendall(data)


def through(url: str, proxy: CountingProxy) -> str:
    """`url` with its host and port replaced by the proxy's."""
    parts = urlsplit(url)
    credentials = parts.netloc.rpartition("@")[0]
    netloc = f"{credentials}@127.0.0.1:{proxy.port}" if credentials else f"127.0.0.1:{proxy.port}"
    return urlunsplit(parts._replace(netloc=netloc))


def upstream_of(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    default = {"postgresql": 5432, "postgres": 5432, "mysql": 3306, "redis": 6379}
    port = parts.port or default.get(parts.scheme, 11211)
    return parts.hostname or "127.0.0.1", port


@dataclass
class Counts:
    """Round trips per fire, one entry per fire, for each role (see the module doc)."""

    lose: list[int] = field(default_factory=list)
    run: list[int] = field(default_factory=list)
    deferred: float = 0.0
    guard_run: list[int] = field(default_factory=list)
    guard_lose: list[int] = field(default_factory=list)

    @staticmethod
    def typical(turns: list[int]) -> float:
        """The median: a driver's one-off (psycopg preparing a statement on its fifth
        use costs one extra round trip, once) does not count as the per-fire cost."""
        return statistics.median(turns)


def measure(backend: str, fires: int, urls: dict[str, str] | None = None) -> Counts:
    """Round trips of every fire for each role (see the module doc).

    `urls`: server kind (`postgres`, `mysql`, `redis`, `memcached`, `etcd`) -> URL; default
    `URLS`.
    """
    provider, server = BACKENDS[backend]
    url = (urls or URLS)[server]
    proxies = [CountingProxy(upstream_of(url)) for _ in range(2)]
    locks: list[Any] = []
    runners: list[FireRunner] = []
    counts = Counts()
    try:
        for index, proxy in enumerate(proxies):
            settings = Settings.from_env(
                {
                    "FIREFLY_SCHEDULING_LOCK_PROVIDER": provider,
                    f"FIREFLY_SCHEDULING_LOCK_{provider.upper()}_URL": through(url, proxy),
                    "FIREFLY_SCHEDULING_HISTORY_URL": "off",
                }
            )
            lock = resolve_lock(settings)
            getattr(lock, "install", lambda: None)()
            locks.append(lock)
            runners.append(FireRunner(lock, node=f"node-{index}"))
        task = f"roundtrips_{uuid.uuid4().hex[:8]}:tick"
        descriptor = ScheduledDescriptor(target=task, fixed_rate=1.0, lock_name=task, lock_ttl=30)
        winner, loser = runners
        start = datetime.now(UTC).replace(microsecond=0)

        def counted(proxy: CountingProxy, action: Callable[[], _R]) -> tuple[int, _R]:
            before = proxy.turns
            result = action()
            time.sleep(0.01)  # let the proxy see the last reply
            return proxy.turns - before, result

        # Warm-up: connections, tables, statement caches; not counted.
        for runner in runners:
            runner.run(Fire.at(descriptor, start - timedelta(seconds=1)), noop)
        for k in range(fires):
            instant = start + timedelta(seconds=k)
            turns, outcome = counted(
                proxies[0], partial(winner.run, Fire.at(descriptor, instant), noop)
            )
            assert outcome.verdict is Verdict.SUCCEEDED, outcome
            counts.run.append(turns)
            turns, outcome = counted(
                proxies[1], partial(loser.run, Fire.at(descriptor, instant), noop)
            )
            assert outcome.verdict is Verdict.CLAIMED_ELSEWHERE, outcome
            counts.lose.append(turns)
        deferred, _ = counted(proxies[0], winner.close)
        counts.deferred = deferred / (fires + 1)  # the warm-up fire claimed one too
        for _ in range(fires):
            turns, ran = counted(proxies[0], lambda: run_guarded(descriptor, noop, locks[0]))
            assert ran is Verdict.SUCCEEDED
            counts.guard_run.append(turns)
            with held(descriptor, locks[0]):
                turns, lost = counted(proxies[1], lambda: run_guarded(descriptor, noop, locks[1]))
            assert lost is Verdict.OVERLAPPING
            counts.guard_lose.append(turns)
        return counts
    finally:
        for runner in runners:
            runner.close()
        for lock in locks:
            getattr(lock, "close", lambda: None)()
        for proxy in proxies:
            proxy.close()


@contextmanager
def held(descriptor: ScheduledDescriptor, lock: Any) -> Iterator[None]:
    """Hold the task's lock in another thread, as a node whose run is in progress."""
    holding, done = threading.Event(), threading.Event()

    def body() -> None:
        holding.set()
        done.wait(10)

    holder = threading.Thread(target=run_guarded, args=(descriptor, body, lock))
    holder.start()
    holding.wait(10)
    try:
        yield
    finally:
        done.set()
        holder.join()


def noop() -> None:
    """A 0 ms body."""


COLUMNS = [
    "backend",
    "node that loses the claim",
    "node that runs the fire",
    "deferred",
    "plain lock guard (run / lose)",
]


def figures(backend: str, counts: Counts) -> dict[str, object]:
    def role(turns: list[int]) -> dict[str, float]:
        return {"median": Counts.typical(turns), "mean": statistics.fmean(turns)}

    return {
        "backend": backend,
        "fires": len(counts.run),
        "lose": role(counts.lose),
        "run": role(counts.run),
        "deferred_mean": counts.deferred,
        "guard_run": role(counts.guard_run),
        "guard_lose": role(counts.guard_lose),
    }


def row(figure: dict[str, Any]) -> list[str]:
    def cell(key: str) -> str:
        return f"{figure[key]['median']:g} ({figure[key]['mean']:.2f})"

    return [
        figure["backend"],
        cell("lose"),
        cell("run"),
        f"{figure['deferred_mean']:.2f}",
        f"{cell('guard_run')} / {cell('guard_lose')}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fires", type=int, default=20)
    parser.add_argument("--backend", action="append", choices=sorted(BACKENDS))
    add_arguments(parser)
    arguments = parser.parse_args()
    shorten(arguments, parser, fires=3)
    backends = arguments.backend or list(BACKENDS)
    run = Run("round_trips", arguments, parser, servers=servers_of(backends))
    print(f"median round trips per fire over {arguments.fires} fires (mean in brackets)")
    table = Table(
        f"Round trips per fire, median (mean) over {arguments.fires} fires", COLUMNS, align="lrrrr"
    )
    every = []
    for backend in backends:
        every.append(figures(backend, measure(backend, arguments.fires)))
        table.rows.append(row(every[-1]))
        print("| " + " | ".join(table.rows[-1]) + " |", flush=True)
    run.write(
        "Round trips per fire",
        [table],
        every,
        notes=[
            "Counted by a proxy between each node's lock and its server: a burst of bytes the "
            "client sends after a reply is one round trip. History off: only the lock's "
            "traffic. `FireRunner.run` on one fire at a time; the resident host's batches "
            "are not counted here.",
            "deferred: round trips sent for a fire later, when the node closes.",
            "plain lock guard: `run_guarded`, the lock without claims, for comparison.",
        ],
    )


if __name__ == "__main__":
    main()
