"""Waiting acquisition: wake-up latency, load on the server while waiting, fairness.

For every backend (its synchronous lock, `acquire(name, ttl, wait=...)`), and in
the same run redis-py's `Lock(blocking=True)` and tooz's locks (Redis, etcd,
PostgreSQL, MySQL) as peers. etcd is measured twice: on the member of
`FIREFLY_TEST_ETCD_URL`, its data on the machine's disk (`etcd`), and on a throwaway
member the run starts with its data on tmpfs (`etcd-tmpfs`, `etcd_member`), as a
dedicated fast disk would behave; each member's own count of its slow log syncs
during the wake-ups is reported beside them.

* **wake-up latency**: a holder releases, a waiter (another instance, its own
  connection) was waiting; from the start of the release call to the return of the
  waiter's acquisition, p50 and p99 over the rounds of each run;
* **requests per second per waiter**: requests a waiter sends while the lock stays
  held: its attempts (`testing.attempt_counter`); redis-py's `do_acquire` calls;
* **fairness**: 16 waiters across 4 processes take the lock in turn; the longest
  wait over the mean wait (the goal is at most 2).

    uv run --group bench python benchmarks/waiting.py            # the reference run
    uv run --group bench python benchmarks/waiting.py --short    # proves the script

Server URLs come from `FIREFLY_TEST_<BACKEND>_URL`, as the integration tests'
(`FIREFLY_TEST_REDIS_CLUSTER_URL` for the cluster; `FIREFLY_TEST_ETCD_TMPFS_URL`, when
set, names a member on tmpfs to use instead of starting one).
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchmark_results import Run, Table, add_arguments, servers_of, shorten, spread, summary
from etcd_member import SLOW_SYNC_SECONDS, Syncs, member_on_tmpfs, wal_syncs
from firefly_scheduling.testing.attempt_counter import ATTEMPT_HOOKS, AttemptCounter

DEFAULTS = {
    "postgres": "postgresql://postgres@127.0.0.1:5432/postgres",
    "mysql": "mysql://root@127.0.0.1:3306/mysql",
    "redis": "redis://127.0.0.1:6379/0",
    "redis-cluster": "redis+cluster://127.0.0.1:7000",
    "memcached": "memcached://127.0.0.1:11211",
    "etcd": "etcd://127.0.0.1:2379",
    "etcd-tmpfs": "",  # started by the run (`etcd_member.member_on_tmpfs`) unless given
    "database": "sqlite:////tmp/firefly-waiting-bench.sqlite3",
}


def url(backend: str) -> str:
    variable = f"FIREFLY_TEST_{backend.upper().replace('-', '_')}_URL"
    return os.environ.get(variable, DEFAULTS[backend])


def factory(backend: str) -> Callable[[], Any]:
    """A callable making a new, independent lock of `backend` (picklable for spawn)."""
    module, cls = {
        "postgres": ("firefly_scheduling_postgres", "PgAdvisoryLock"),
        "mysql": ("firefly_scheduling_mysql", "MySqlNamedLock"),
        "redis": ("firefly_scheduling_redis", "RedisLock"),
        "redis-cluster": ("firefly_scheduling_redis", "RedisLock"),
        "memcached": ("firefly_scheduling_memcached", "MemcachedLock"),
        "etcd": ("firefly_scheduling_etcd", "EtcdLock"),
        "etcd-tmpfs": ("firefly_scheduling_etcd", "EtcdLock"),
        "database": ("firefly_scheduling_database", "DatabaseLeaseLock"),
    }[backend]
    lock_class = getattr(__import__(module), cls)
    if backend == "database":
        lock_class(url(backend)).install()  # its tables, once (idempotent)
    return partial(lock_class, url(backend))


def counted_requests(lock: Any) -> AttemptCounter:
    """Counts the requests `lock` sends while it waits: its attempts, whatever hook."""
    return AttemptCounter(lock, hooks=[hook for hook in ATTEMPT_HOOKS if hasattr(lock, hook)])


# -- wake-up latency and load -------------------------------------------------------


def ours(backend: str) -> tuple[Callable[[str], Any], Callable[[str, float], Any], Any]:
    make = factory(backend)
    holder, waiter = make(), make()

    def hold(name: str) -> Callable[[], None]:
        holding = holder.acquire(name, 30)
        assert holding is not None
        return lambda: holder.release_holding(holding)

    def wait(name: str, seconds: float) -> Callable[[], None] | None:
        holding = waiter.acquire(name, 30, wait=seconds)
        return None if holding is None else (lambda: waiter.release_holding(holding))

    return hold, wait, counted_requests(waiter)


def redis_py() -> tuple[Callable[[str], Any], Callable[[str, float], Any], Any]:
    import redis  # noqa: PLC0415
    import redis.lock  # noqa: PLC0415

    holder, waiter = redis.Redis.from_url(url("redis")), redis.Redis.from_url(url("redis"))
    counter = SimpleNamespace(count=0)

    class CountedLock(redis.lock.Lock):
        def do_acquire(self, token: str) -> bool:
            counter.count += 1
            return bool(super().do_acquire(token))

    def hold(name: str) -> Callable[[], None]:
        lock = holder.lock(f"bench:{name}", timeout=30)
        assert lock.acquire(blocking=False)
        release: Callable[[], None] = lock.release
        return release

    def wait(name: str, seconds: float) -> Callable[[], None] | None:
        lock = waiter.lock(
            f"bench:{name}",
            timeout=30,
            blocking_timeout=seconds,
            lock_class=CountedLock,
            thread_local=False,  # taken in the waiting thread, released by the main one
        )
        return lock.release if lock.acquire(blocking=True) else None

    return hold, wait, counter


#: tooz's URL for each backend it is measured on (its drivers: redis-py, etcd3gw,
#: psycopg2, PyMySQL).
TOOZ_SCHEMES = {
    "redis": "redis",
    "etcd": "etcd3+http",
    "etcd-tmpfs": "etcd3+http",
    "postgres": "postgresql",
    "mysql": "mysql",
}
#: The backends on an etcd member, whose log syncs are read around the wake-ups.
ETCD_BACKENDS = ("etcd", "etcd-tmpfs")


def tooz_lock(backend: str) -> tuple[Callable[[str], Any], Callable[[str, float], Any], None]:
    from tooz import coordination  # noqa: PLC0415

    parts = urlsplit(url(backend))
    address = f"{TOOZ_SCHEMES[backend]}://{parts.netloc}{'' if backend == 'redis' else parts.path}"
    holder, waiter = (
        coordination.get_coordinator(address, f"{role}-{uuid.uuid4().hex}".encode())
        for role in ("holder", "waiter")
    )
    holder.start()
    waiter.start()

    def hold(name: str) -> Callable[[], None]:
        lock: Any = holder.get_lock(name.encode())
        assert lock.acquire(blocking=False)
        release: Callable[[], None] = lock.release
        return release

    def wait(name: str, seconds: float) -> Callable[[], None] | None:
        lock: Any = waiter.get_lock(name.encode())  # `blocking` takes seconds, too
        release: Callable[[], None] = lock.release
        return release if lock.acquire(blocking=seconds) else None

    return hold, wait, None


#: Where a waiter of ours is while it waits: asleep between attempts, or in an
#: attempt that waits on the server (PostgreSQL, MySQL).
WAITING_FRAMES = frozenset({"sleep_until_woken", "_acquire_within"})
#: Longest the release waits for a waiter of ours to be waiting.
READY_SECONDS = 5.0


def waiting_now(thread: threading.Thread) -> bool:
    """Whether `thread`, a waiter of ours, is waiting (`WAITING_FRAMES`), not still in
    its first attempt or in joining the server's queue of waiters."""
    frame = sys._current_frames().get(thread.ident or -1)
    while frame is not None:
        if frame.f_code.co_name in WAITING_FRAMES:
            return True
        frame = frame.f_back
    return False


def wake_latency(
    hold: Any, wait: Any, rounds: int, ready: Callable[[threading.Thread], bool] | None = None
) -> tuple[list[float], int]:
    """Milliseconds from the start of the holder's release to the waiter's win; and
    how many rounds the release waited past 0.15 s for the waiter to be waiting.

    `ready` (ours): whether the waiter is waiting yet. On a loaded machine a waiter's
    first attempt and its joining the queue can outlast the 0.15 s, and a release
    then would time a first attempt, not a wake-up.
    """
    samples, late = [], 0
    for _ in range(rounds):
        name = f"bench-wait-{uuid.uuid4().hex}"
        release = hold(name)
        won: list[Any] = []
        thread = threading.Thread(target=_wait_into, args=(wait, name, won))
        thread.start()
        time.sleep(0.15)  # the waiter is waiting (on the server, where it can)
        if ready is not None and not ready(thread):
            late += 1
            give_up = time.monotonic() + READY_SECONDS
            while not ready(thread) and time.monotonic() < give_up:
                time.sleep(0.005)
        released_at = time.monotonic()
        release()
        thread.join(35)
        unlock, won_at = won[0]
        assert unlock is not None, "the waiter did not win"
        samples.append((won_at - released_at) * 1000)
        unlock()
    return samples, late


def _wait_into(wait: Any, name: str, won: list[Any]) -> None:
    won.append((wait(name, 30), time.monotonic()))


def load(hold: Any, wait: Any, counted: Any, seconds: float) -> float | None:
    """Acquisition round trips per second a waiter sends while the lock stays held."""
    if counted is None:
        return None
    name = f"bench-load-{uuid.uuid4().hex}"
    release = hold(name)
    before = counted.count
    started = time.monotonic()
    assert wait(name, seconds) is None
    rate = float(counted.count - before) / (time.monotonic() - started)
    release()
    return rate


# -- fairness ------------------------------------------------------------------------


def fairness_worker(make: Callable[[], Any], name: str, rounds: int, threads: int) -> list[float]:
    lock = make()
    waits: list[float] = []
    mutex = threading.Lock()

    def run() -> None:
        for _ in range(rounds):
            started = time.monotonic()
            holding = lock.acquire(name, 30, wait=120)
            assert holding is not None
            with mutex:
                waits.append(time.monotonic() - started)
            time.sleep(0.02)
            lock.release_holding(holding)

    workers = [threading.Thread(target=run) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return waits


def fairness(backend: str, rounds: int) -> float:
    """The longest wait over the mean, 16 waiters in 4 processes."""
    name = f"bench-fair-{uuid.uuid4().hex}"
    context = multiprocessing.get_context("spawn")
    with context.Pool(4) as pool:
        results = [
            pool.apply_async(fairness_worker, (factory(backend), name, rounds, 4)) for _ in range(4)
        ]
        waits = [w for result in results for w in result.get(timeout=600)]
    return max(waits) / statistics.mean(waits)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument(
        "--peer-rounds", type=int, default=20, help="wake-ups per run of a peer library"
    )
    parser.add_argument("--load-seconds", type=float, default=3.0)
    parser.add_argument("--fair-rounds", type=int, default=4)
    parser.add_argument("--only", action="append", choices=sorted(DEFAULTS), default=None)
    add_arguments(parser)
    args = parser.parse_args()
    shorten(args, parser, runs=2, rounds=10, peer_rounds=5, load_seconds=1.5, fair_rounds=2)
    selected = args.only or list(DEFAULTS)
    with contextlib.ExitStack() as stack:
        if "etcd-tmpfs" in selected and not os.environ.get("FIREFLY_TEST_ETCD_TMPFS_URL"):
            # The fairness workers are spawned: they read the URL from the environment.
            os.environ["FIREFLY_TEST_ETCD_TMPFS_URL"] = stack.enter_context(member_on_tmpfs())
        measure(args, parser, selected)


def measure(args: argparse.Namespace, parser: argparse.ArgumentParser, selected: list[str]) -> None:
    run = Run("waiting", args, parser, servers=servers_of(selected), uv_groups=["bench"])
    cases: list[tuple[str, str, Callable[[], Any]]] = [
        (b, "firefly", partial(ours, b)) for b in selected
    ]
    if "redis" in selected:
        cases.append(("redis", "redis-py Lock(blocking=True)", redis_py))
    cases += [(b, "tooz", partial(tooz_lock, b)) for b in selected if b in TOOZ_SCHEMES]
    figures: list[dict[str, Any]] = []
    table = Table(
        "Waiting acquisition",
        [
            "backend",
            "implementation",
            "wake-up p50 ms",
            "wake-up p99 ms",
            "requests/s per waiter",
            "longest/mean wait (16 waiters, 4 processes)",
        ],
        align="llrrrr",
    )
    slow_ms = f"{SLOW_SYNC_SECONDS * 1000:g}"
    disk_table = Table(
        "etcd's log syncs during firefly's wake-ups",
        [
            "backend",
            "member's data",
            "wake-ups",
            "log syncs",
            f"syncs over {slow_ms} ms",
            "slowest sync, at most ms",
        ],
        align="llrrrr",
    )
    for backend, label, build in cases:
        p50s, p99s, rates, fairs, lates = [], [], [], [], []
        syncs = Syncs(0, {})
        watch_syncs = label == "firefly" and backend in ETCD_BACKENDS
        for _ in range(args.runs):
            hold, wait, counter = build()
            rounds = args.rounds if label == "firefly" else args.peer_rounds
            before = wal_syncs(url(backend)) if watch_syncs else None
            ready = waiting_now if label == "firefly" else None
            samples, late = wake_latency(hold, wait, rounds, ready)
            lates.append(late)
            if before is not None:
                during = wal_syncs(url(backend)).since(before)
                syncs = Syncs(
                    syncs.count + during.count,
                    {b: syncs.at_most.get(b, 0) + n for b, n in during.at_most.items()},
                )
            p50s.append(percentile(samples, 0.5))
            p99s.append(percentile(samples, 0.99))
            rate = load(hold, wait, counter, args.load_seconds)
            if rate is not None:
                rates.append(rate)
            if label == "firefly":
                fairs.append(fairness(backend, args.fair_rounds))
        figure: dict[str, Any] = {
            "backend": backend,
            "implementation": label,
            "wake_p50_ms": summary(p50s),
            "wake_p99_ms": summary(p99s),
            "requests_per_second_per_waiter": summary(rates),
            "longest_over_mean_wait": summary(fairs),
        }
        if label == "firefly":
            figure["rounds_waiter_late"] = lates
        row = [backend, label, spread(p50s, 2), spread(p99s, 2), spread(rates, 1), spread(fairs, 2)]
        table.rows.append(row)
        print(" | ".join(row), flush=True)
        if any(lates):
            print(f"  rounds whose waiter was not waiting after 0.15 s, per run: {lates}")
        if watch_syncs:
            slowest = syncs.slowest_bound()
            figure["wal_syncs"] = {
                "wake_ups": args.runs * args.rounds,
                "count": syncs.count,
                "over_slow_ms": syncs.slow(),
                "slow_ms": SLOW_SYNC_SECONDS * 1000,
                "slowest_at_most_ms": None if slowest is None else slowest * 1000,
            }
            disk_table.rows.append(
                [
                    backend,
                    "tmpfs" if backend == "etcd-tmpfs" else "the machine's disk",
                    str(args.runs * args.rounds),
                    str(syncs.count),
                    str(syncs.slow()),
                    "-" if slowest is None else f"{slowest * 1000:g}",
                ]
            )
            print("  log syncs: " + " | ".join(disk_table.rows[-1][1:]), flush=True)
        figures.append(figure)
    run.write(
        "Waiting acquisition: wake-up latency, load while waiting, fairness",
        [table, disk_table] if disk_table.rows else [table],
        figures,
        notes=[
            f"{args.runs} runs; each: {args.rounds} wake-ups ({args.peer_rounds} for a peer "
            "library, some of which poll once a second; holder and waiter are two "
            "instances, two connections, in one process; latency from the start of the "
            "release call to the waiter's return, released once the waiter waits: 0.15 s "
            "after it started, and for firefly's locks no sooner than it sleeps between "
            "attempts or waits on the server; with so few samples p99 is their "
            "maximum), a waiter kept waiting "
            f"{args.load_seconds:g} s on a held lock (requests counted at the lock's attempt "
            "hooks; redis-py's `do_acquire`), and 16 "
            f"waiters in 4 processes taking the lock {args.fair_rounds} times each. Median "
            "(range) over the runs.",
            "Peers: redis-py's `Lock(blocking=True)` sleeps 0.1 s between tries; tooz "
            "(`acquire(blocking=seconds)`) on its redis, etcd3+http, postgresql and mysql "
            "drivers; requests/s and fairness are not measured for tooz.",
            "etcd: the member of `FIREFLY_TEST_ETCD_URL` keeps its data on the machine's "
            "disk; `etcd-tmpfs` is a one-member etcd of the same binary the run starts with "
            "its data on tmpfs, standing for a dedicated fast disk (`etcd_member`). A wake-up "
            "waits for two of the member's log syncs (the release's Raft write, then the "
            "waiter's); the syncs table counts every sync each member made during the "
            "wake-ups (its `etcd_disk_wal_fsync_duration_seconds`): the other writes of "
            "each round, and on the shared member anyone else's, included; the slowest "
            "is the histogram's bucket bound.",
        ],
    )


if __name__ == "__main__":
    main()
