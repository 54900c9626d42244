"""Fire claims per second at saturation, fleet-wide: each adapter, and its raw driver.

A locked fixed_rate or cron fire starts with a fire claim on every node that sees it
(`FireRunner._claim`: `claiming_lock(lock).try_claim(claim_name(...), seconds)`), so
the claims a backend can take per second bound the fires a fleet can attempt. This
script measures that bound the way a fleet loads the server:

* P processes (default 4, the "fleet"), each with T threads (default 8) sharing ONE
  lock instance, as the threads of one node share the node's lock;
* every claim is on a fresh fire name (its own target, a new instant each time), so
  every claim wins and nothing contends: the figure is the server's and the
  client's throughput, not a measure of lost races;
* beside each adapter, its raw driver sends the SAME claim statement or command
  (taken from the adapter's module, on purpose: the bytes on the wire are equal)
  from the same P x T threads, each thread on its own connection: the ceiling, and
  the ratio adapter / raw says how much of it the adapter reaches. Both build the
  claim name with `claim_name`, so the ratio is the lock layer's cost alone.

Reported per backend, over `--runs` runs (adapter and raw alternate within a run,
the first of the two swapping every run): claims/s fleet-wide (median and range),
process CPU per claim (user + system over the window, all threads, summed over the
processes, divided by the claims), and the most TCP connections one process held to
the server (sampled through the window). Rows are printed as markdown, and written
to `docs/results/claims.md` and `claims.json` (see `benchmark_results`).

    uv run python benchmarks/claims.py [--backends redis postgres] [--seconds 5]
        [--runs 3] [--processes 4] [--threads 8]

Backends: postgres, mysql, redis, memcached, etcd, database-sqlite,
database-postgres, database-mariadb; URLs from the `FIREFLY_TEST_*_URL` variables
(the local servers by default), as in `benchmarks/locks.py`. Claims written here
expire after `--claim-seconds` (default 10) and are swept like any other.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import queue
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from multiprocessing.synchronize import Barrier
from typing import Any
from urllib.parse import urlsplit

import psutil

from benchmark_results import Run, Table, add_arguments, servers_of, shorten, spread, summary
from firefly_scheduling.fires.claims import claim_name

BACKENDS = (
    "postgres",
    "mysql",
    "redis",
    "memcached",
    "etcd",
    "database-sqlite",
    "database-postgres",
    "database-mariadb",
)

#: Claim one fire name; True when won (every benchmark claim must win).
Claim = Callable[[str], bool]


def url(backend: str, default: str) -> str:
    return os.environ.get(f"FIREFLY_TEST_{backend.upper()}_URL", default)


POSTGRES = url("postgres", "postgresql://postgres@127.0.0.1:5432/test")
MYSQL = url("mysql", "mysql://root@127.0.0.1:3306/test")
REDIS = url("redis", "redis://127.0.0.1:6379/0")
MEMCACHED = url("memcached", "memcached://127.0.0.1:11211")
ETCD = url("etcd", "etcd://127.0.0.1:2379")


def database_url(backend: str, sqlite_path: str) -> str:
    return {
        "database-sqlite": f"sqlite:///{sqlite_path}",
        "database-postgres": POSTGRES.replace("postgresql://", "postgresql+psycopg://", 1),
        "database-mariadb": MYSQL.replace("mysql://", "mysql+pymysql://", 1),
    }[backend]


def server_port(backend: str) -> int | None:
    """The TCP port whose connections are counted; None for SQLite (a file)."""
    server = {
        "postgres": (POSTGRES, 5432),
        "database-postgres": (POSTGRES, 5432),
        "mysql": (MYSQL, 3306),
        "database-mariadb": (MYSQL, 3306),
        "redis": (REDIS, 6379),
        "memcached": (MEMCACHED, 11211),
        "etcd": (ETCD, 2379),
    }.get(backend)
    if server is None:
        return None
    return urlsplit(server[0]).port or server[1]


def require(condition: bool, message: str) -> None:
    """A benchmark that silently counts failed claims would report nonsense."""
    if not condition:
        raise RuntimeError(message)


# -- the adapters: the runner's own call ------------------------------------------------


def adapter_lock(backend: str, sqlite_path: str) -> Any:
    """The backend's lock, built from its URL as a node's provider would."""
    if backend == "postgres":
        from firefly_scheduling_postgres import PgAdvisoryLock  # noqa: PLC0415

        return PgAdvisoryLock(POSTGRES)
    if backend == "mysql":
        from firefly_scheduling_mysql import MySqlNamedLock  # noqa: PLC0415

        return MySqlNamedLock(MYSQL)
    if backend == "redis":
        from firefly_scheduling_redis import RedisLock  # noqa: PLC0415

        return RedisLock(REDIS)
    if backend == "memcached":
        from firefly_scheduling_memcached import MemcachedLock  # noqa: PLC0415

        return MemcachedLock(MEMCACHED)
    if backend == "etcd":
        from firefly_scheduling_etcd import EtcdLock  # noqa: PLC0415

        return EtcdLock(ETCD)
    from firefly_scheduling_database import DatabaseLeaseLock  # noqa: PLC0415

    return DatabaseLeaseLock(database_url(backend, sqlite_path))


def adapter_claims(stack: ExitStack, backend: str, sqlite_path: str) -> Callable[[], Claim]:
    """One lock for the process; every thread claims through it, as a node's threads do."""
    from firefly_scheduling.locks.port_holdings import claiming_lock  # noqa: PLC0415

    lock = adapter_lock(backend, sqlite_path)
    stack.callback(lock.close)
    claims = claiming_lock(lock)
    seconds = _claim_seconds()
    return lambda: lambda name: claims.try_claim(name, seconds)


# -- the raw drivers: the same statement, one connection per thread ----------------------


def raw_claims(stack: ExitStack, backend: str, sqlite_path: str) -> Callable[[], Claim]:
    """A factory of per-thread raw claimers, each on a connection of its own."""
    factories: dict[str, Callable[[ExitStack, str], Callable[[], Claim]]] = {
        "postgres": lambda s, _: raw_postgres(s),
        "mysql": lambda s, _: raw_mysql(s),
        "redis": lambda s, _: raw_redis(s),
        "memcached": lambda s, _: raw_memcached(s),
        "etcd": lambda s, _: raw_etcd(s),
    }
    factory = factories.get(backend)
    if factory is not None:
        return factory(stack, sqlite_path)
    return raw_database(stack, database_url(backend, sqlite_path))


def raw_postgres(stack: ExitStack) -> Callable[[], Claim]:
    import psycopg  # noqa: PLC0415

    from firefly_scheduling_postgres import protocol  # noqa: PLC0415

    statement = protocol.CLAIM  # the adapter's exact statement and parameters
    seconds = _claim_seconds()

    def connect() -> Claim:
        connection = psycopg.connect(POSTGRES, autocommit=True)
        stack.callback(connection.close)
        cursor = connection.cursor()

        def claim(name: str) -> bool:
            cursor.execute(statement, protocol.claim_parameters(name, seconds))
            return cursor.fetchone() is not None

        return claim

    return connect


def raw_mysql(stack: ExitStack) -> Callable[[], Claim]:
    import pymysql  # noqa: PLC0415

    from firefly_scheduling_mysql import protocol  # noqa: PLC0415
    from firefly_scheduling_mysql.url import connection_arguments  # noqa: PLC0415

    statement = protocol.CLAIM  # the adapter's exact statement and parameters
    seconds = _claim_seconds()

    def connect() -> Claim:
        connection = pymysql.connect(**connection_arguments(MYSQL), autocommit=True)
        stack.callback(connection.close)

        def claim(name: str) -> bool:
            with connection.cursor() as cursor:
                cursor.execute(statement, protocol.claim_parameters(name, seconds))
                return cursor.rowcount in protocol.CLAIM_WON

        return claim

    return connect


def raw_redis(stack: ExitStack) -> Callable[[], Claim]:
    import redis  # noqa: PLC0415

    from firefly_scheduling_redis import RedisLock  # noqa: PLC0415

    milliseconds = math.ceil(_claim_seconds() * 1000)

    def connect() -> Claim:
        client = redis.Redis.from_url(REDIS)
        stack.callback(client.close)

        def claim(name: str) -> bool:
            token = os.urandom(16).hex()
            return bool(client.set(RedisLock.key(name), token, nx=True, px=milliseconds))

        return claim

    return connect


def raw_memcached(stack: ExitStack) -> Callable[[], Claim]:
    from pymemcache.client.base import Client  # noqa: PLC0415

    from firefly_scheduling_memcached import MemcachedLock  # noqa: PLC0415

    parts = urlsplit(MEMCACHED)
    expire = math.ceil(_claim_seconds()) + 1  # the adapter's rounding (protocol.server_expiry)

    def connect() -> Claim:
        client = Client(
            (parts.hostname or "127.0.0.1", parts.port or 11211),
            no_delay=True,
            default_noreply=False,
            connect_timeout=3.0,
            timeout=3.0,
        )
        stack.callback(client.close)

        def claim(name: str) -> bool:
            token = os.urandom(16).hex().encode()
            return bool(client.add(MemcachedLock.key(name), token, expire=expire, noreply=False))

        return claim

    return connect


def raw_etcd(stack: ExitStack) -> Callable[[], Claim]:
    """The three requests of an uncontended claim: range (count), lease grant, create txn.

    Over the standard library's `http.client`, kept alive, as the synchronous
    `EtcdLock` sends them (`firefly_scheduling_etcd.gateway`); the lock used httpx's
    client until it measured three times the CPU per request.
    """
    import base64  # noqa: PLC0415
    import http.client  # noqa: PLC0415
    import json  # noqa: PLC0415
    import random  # noqa: PLC0415

    from firefly_scheduling_etcd.protocol import lease_seconds, lock_key  # noqa: PLC0415

    parts = urlsplit(ETCD)
    ttl = str(lease_seconds(_claim_seconds()))
    headers = {"Content-Type": "application/json"}

    def connect() -> Claim:
        connection = http.client.HTTPConnection(
            parts.hostname or "127.0.0.1", parts.port or 2379, timeout=3.0
        )
        stack.callback(connection.close)

        def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
            connection.request("POST", f"/v3/{path}", json.dumps(body), headers)
            answer: dict[str, Any] = json.loads(connection.getresponse().read())
            return answer

        def claim(name: str) -> bool:
            key = base64.b64encode(lock_key(name)).decode()
            if int(post("kv/range", {"key": key, "count_only": True}).get("count", 0)) > 0:
                return False
            lease = str(random.getrandbits(62) + 1)
            post("lease/grant", {"ID": lease, "TTL": ttl})
            value = base64.b64encode(os.urandom(16).hex().encode()).decode()
            absent = {"key": key, "target": "CREATE", "result": "EQUAL", "create_revision": "0"}
            create = {
                "compare": [absent],
                "success": [{"request_put": {"key": key, "value": value, "lease": lease}}],
            }
            return post("kv/txn", create).get("succeeded") is True

        return claim

    return connect


def raw_database(stack: ExitStack, database: str) -> Callable[[], Claim]:
    """The adapter's upsert, sent through a bare DBAPI connection, then a commit.

    The connection is in autocommit already (the engine's `connect` event), so the
    commit changes nothing on the server; PyMySQL still sends it (one more round
    trip), psycopg and sqlite3 do not. The ratio on MariaDB flatters the adapter.

    The statement, key and TTL formulas are read from a lock (private attributes, on
    purpose), and each thread takes its own DBAPI connection from that lock's engine,
    so the driver's connect arguments are the adapter's too.
    """
    from sqlalchemy import Engine, create_engine  # noqa: PLC0415
    from sqlalchemy.pool import NullPool  # noqa: PLC0415

    from firefly_scheduling_database import DatabaseLeaseLock  # noqa: PLC0415
    from firefly_scheduling_database.engine import _engine_arguments  # noqa: PLC0415
    from firefly_scheduling_database.url import DRIVERS  # noqa: PLC0415

    lock = DatabaseLeaseLock(database)
    stack.callback(lock.close)
    lock.install()  # a fresh SQLite file has no table yet; elsewhere a no-op
    sql = lock._sql
    ttl = sql.ttl(_claim_seconds())
    engine = lock._bind
    require(isinstance(engine, Engine), "a lock built from a URL owns an Engine")
    assert isinstance(engine, Engine)  # for the type checker

    # The lock's own pool is bounded (2 connections for the lock by default): the raw
    # case takes one connection per thread, as its ceiling, from an engine of its own,
    # with the lock's driver arguments (on MySQL, no CLIENT_FOUND_ROWS: one round trip
    # tells a won upsert from a refused one, as in the adapter).
    _, arguments = _engine_arguments(database, DRIVERS, "lock", None)
    raw_engine = create_engine(
        engine.url, poolclass=NullPool, connect_args=arguments["connect_args"]
    )
    stack.callback(raw_engine.dispose)

    def connect() -> Claim:
        raw = raw_engine.raw_connection()
        stack.callback(raw.close)
        connection = raw.dbapi_connection
        if connection is None:
            raise RuntimeError("the engine gave no DBAPI connection")
        cursor = connection.cursor()

        def claim(name: str) -> bool:
            parameters = {"name": sql.key(name), "owner": os.urandom(16).hex(), "ttl": ttl}
            cursor.execute(sql.acquire.driver_sql, sql.acquire.driver_parameters(parameters))
            won = sql.acquired(cursor.rowcount, connection)  # the adapter's rule
            require(won is not None, "the raw connection counts found rows: ambiguous")
            connection.commit()
            return bool(won)

        return claim

    return connect


# -- one process of the fleet ------------------------------------------------------------


@dataclass(frozen=True)
class Job:
    backend: str
    flavour: str  # "adapter" or "raw"
    seconds: float
    threads: int
    claim_seconds: float
    sqlite_path: str
    prefix: str


@dataclass(frozen=True)
class ProcessResult:
    claims: int
    errors: int
    elapsed: float
    cpu: float
    connections: int


def _claim_seconds() -> float:
    return float(os.environ["FIREFLY_BENCH_CLAIM_SECONDS"])


def fire_names(target: str) -> Iterator[str]:
    """Claim names of successive fires of `target`, one microsecond apart: all distinct."""
    start = datetime.now(UTC)
    for step in range(sys.maxsize):
        yield claim_name(target, target, start + timedelta(microseconds=step))


def run_process(job: Job, index: int, barrier: Barrier, results: Any) -> None:
    """Build the claimers, warm every thread's connection, wait for the fleet, claim."""
    os.environ["FIREFLY_BENCH_CLAIM_SECONDS"] = str(job.claim_seconds)
    with ExitStack() as stack:
        build = adapter_claims if job.flavour == "adapter" else raw_claims
        factory = build(stack, job.backend, job.sqlite_path)
        claimers = [factory() for _ in range(job.threads)]
        names = [fire_names(f"{job.prefix}.{index}.{thread}") for thread in range(job.threads)]
        for claim, thread_names in zip(claimers, names, strict=True):
            claim(next(thread_names))  # opens the thread's connection; refusals count later
        counts = [0] * job.threads
        port = server_port(job.backend)
        peak = [count_connections(port)]
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.05):
                peak[0] = max(peak[0], count_connections(port))

        errors = [0] * job.threads
        failures: list[BaseException] = []

        def work(thread: int, stop_at: float) -> None:
            """Claim until `stop_at`. Nothing contends, so a claim not won is a failure of
            the backend: an error (a SQLite busy timeout is one), or a refusal. Both are
            counted; each thread shows its first."""
            claim, thread_names = claimers[thread], names[thread]
            try:
                while time.monotonic() < stop_at:
                    name = next(thread_names)
                    try:
                        won = claim(name)
                    except Exception as err:  # noqa: BLE001 - counted and shown once
                        won, why = False, repr(err)
                    else:
                        why = f"the uncontended claim {name} was refused"
                    if won:
                        counts[thread] += 1
                        continue
                    if not errors[thread]:
                        print(f"{job.backend} {job.flavour}: {why}", file=sys.stderr)
                    errors[thread] += 1
            except BaseException as err:  # reported by the process, not lost with the thread
                failures.append(err)
                raise

        barrier.wait()
        cpu_start, started = time.process_time(), time.monotonic()
        stop_at = started + job.seconds
        workers = [threading.Thread(target=work, args=(t, stop_at)) for t in range(job.threads)]
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        elapsed, cpu = time.monotonic() - started, time.process_time() - cpu_start
        done.set()
        sampler.join()
        if failures:
            raise failures[0]
        results.put(ProcessResult(sum(counts), sum(errors), elapsed, cpu, peak[0]))


def count_connections(port: int | None) -> int:
    """TCP connections this process holds to the server's port."""
    if port is None:
        return 0
    connections = psutil.Process().net_connections(kind="tcp")
    return sum(1 for c in connections if c.raddr and c.raddr.port == port)


# -- the fleet -----------------------------------------------------------------------------


@dataclass(frozen=True)
class FleetResult:
    claims_per_second: float
    errors: int
    cpu_ms_per_claim: float
    connections: int


def run_fleet(job: Job, processes: int) -> FleetResult:
    # Forked: a spawned child re-imports everything, which takes tens of seconds on a
    # loaded machine. The parent holds no connection and runs no thread at this point.
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(processes + 1)
    results = context.Queue()
    children = [
        context.Process(target=run_process, args=(job, index, barrier, results))
        for index in range(processes)
    ]
    for child in children:
        child.start()
    try:
        barrier.wait(timeout=300)
        collected: list[ProcessResult] = []
        while len(collected) < processes:
            try:
                collected.append(results.get(timeout=1.0))
            except queue.Empty:
                failed = [child.exitcode for child in children if child.exitcode]
                require(not failed, f"{job.backend} {job.flavour}: a process failed ({failed})")
    finally:
        for child in children:
            child.join(timeout=30)
            if child.is_alive():
                child.terminate()
    require(all(child.exitcode == 0 for child in children), f"{job.backend}: a process failed")
    claims = sum(result.claims for result in collected)
    return FleetResult(
        claims_per_second=sum(result.claims / result.elapsed for result in collected),
        errors=sum(result.errors for result in collected),
        cpu_ms_per_claim=1000 * sum(result.cpu for result in collected) / max(claims, 1),
        connections=max(result.connections for result in collected),
    )


def prepare(backend: str, sqlite_path: str) -> None:
    """Create the claim tables once, before any timed window (a first claim does it)."""
    os.environ["FIREFLY_BENCH_CLAIM_SECONDS"] = "1"
    with ExitStack() as stack:
        lock = adapter_lock(backend, sqlite_path)
        stack.callback(lock.close)
        if backend.startswith("database-"):
            lock.install()
        from firefly_scheduling.locks.port_holdings import claiming_lock  # noqa: PLC0415

        name = claim_name(f"bench.claims.{uuid.uuid4().hex}", "x", datetime.now(UTC))
        require(claiming_lock(lock).try_claim(name, 1.0), f"{backend}: the first claim lost")


COLUMNS = [
    "backend",
    "adapter claims/s",
    "raw driver claims/s",
    "adapter / raw",
    "CPU ms per claim (adapter / raw)",
    "connections per process (adapter / raw)",
    "claims not won (adapter / raw)",
]


def measure_backend(args: argparse.Namespace, backend: str, sqlite_path: str) -> dict[str, Any]:
    """`--runs` runs of the adapter and the raw driver, alternating; machine-readable."""
    prepare(backend, sqlite_path)
    measured: dict[str, list[FleetResult]] = {"adapter": [], "raw": []}
    ratios: list[float] = []
    for run in range(args.runs):
        order = ("adapter", "raw") if run % 2 == 0 else ("raw", "adapter")
        for flavour in order:
            job = Job(
                backend=backend,
                flavour=flavour,
                seconds=args.seconds,
                threads=args.threads,
                claim_seconds=args.claim_seconds,
                sqlite_path=sqlite_path,
                prefix=f"bench.claims.{uuid.uuid4().hex[:12]}",
            )
            measured[flavour].append(run_fleet(job, args.processes))
        ratios.append(
            measured["adapter"][-1].claims_per_second / measured["raw"][-1].claims_per_second
        )
    adapter, raw = measured["adapter"], measured["raw"]
    return {
        "backend": backend,
        "adapter_claims_per_second": summary([r.claims_per_second for r in adapter]),
        "raw_claims_per_second": summary([r.claims_per_second for r in raw]),
        "adapter_over_raw": summary(ratios),
        "cpu_ms_per_claim": {
            "adapter": statistics.median(r.cpu_ms_per_claim for r in adapter),
            "raw": statistics.median(r.cpu_ms_per_claim for r in raw),
        },
        "connections_per_process": {
            "adapter": max(r.connections for r in adapter),
            "raw": max(r.connections for r in raw),
        },
        "claims_not_won": {
            "adapter": sum(r.errors for r in adapter),
            "raw": sum(r.errors for r in raw),
        },
    }


def row(figure: dict[str, Any]) -> list[str]:
    def values(key: str) -> list[float]:
        cell = figure[key]
        return [cell["min"], cell["median"], cell["max"]] if cell["runs"] > 1 else [cell["median"]]

    cpu, connections = figure["cpu_ms_per_claim"], figure["connections_per_process"]
    errors = figure["claims_not_won"]
    return [
        figure["backend"],
        spread(values("adapter_claims_per_second"), 0, thousands=True),
        spread(values("raw_claims_per_second"), 0, thousands=True),
        spread(values("adapter_over_raw"), 2),
        f"{cpu['adapter']:.2f} / {cpu['raw']:.2f}",
        f"{connections['adapter']} / {connections['raw']}",
        f"{errors['adapter']} / {errors['raw']}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS))
    parser.add_argument("--seconds", type=float, default=5.0, help="timed window per fleet run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--threads", type=int, default=8, help="threads per process")
    parser.add_argument("--claim-seconds", type=float, default=10.0)
    add_arguments(parser)
    args = parser.parse_args()
    shorten(args, parser, seconds=1.0, runs=1, processes=2, threads=2)
    run = Run("claims", args, parser, servers=servers_of(args.backends))

    load = os.getloadavg()
    print(
        f"# fire claims at saturation, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, "
        f"{os.cpu_count()} CPUs, load average {load[0]:.0f} / {load[1]:.0f} / {load[2]:.0f}; "
        f"{args.processes} processes x {args.threads} threads, {args.runs} runs of "
        f"{args.seconds:g} s each"
    )
    print()
    table = Table("Fire claims per second at saturation, fleet-wide", COLUMNS, align="lrrrrrr")
    print("| " + " | ".join(COLUMNS) + " |")
    every: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as scratch:
        sqlite_path = os.path.join(scratch, "claims.sqlite3")
        for backend in args.backends:
            every.append(measure_backend(args, backend, sqlite_path))
            table.rows.append(row(every[-1]))
            print("| " + " | ".join(table.rows[-1]) + " |", flush=True)
    run.write(
        "Fire claims per second at saturation",
        [table],
        every,
        notes=[
            f"{args.processes} processes, each with {args.threads} threads sharing one lock, "
            f"claim fresh fire names for {args.seconds:g} s; {args.runs} run(s), adapter and "
            "raw driver alternating. Every claim must win: a claim not won is an error of "
            "the backend (a SQLite busy timeout), counted in the last column.",
            "raw driver: the adapter's own claim statement or command, each thread on its "
            "own connection; adapter / raw is how much of that ceiling the adapter reaches.",
        ],
    )


if __name__ == "__main__":
    main()
