"""Median µs per acquire+release cycle: every adapter, its raw-driver floor, and peers.

All cases run in ONE process, in interleaved rounds (a fresh random order each
round), so a noisy neighbour slows every case alike and the ratios stay
meaningful. The floor of a backend is its raw driver sending exactly the
statements the adapter sends for one cycle, on one reused connection; the ratio
adapter / floor is our overhead. Peers are measured the same way.

Peers are installed only for this script (`uv sync --all-packages --group bench`),
never as dependencies. Servers come from the same `FIREFLY_TEST_*_URL` variables
as the tests (defaults: the local servers). The figures go to `docs/results/locks.md`
and `locks.json` (see `benchmark_results`). Run:

    uv run --group bench python benchmarks/locks.py [--rounds 15] [--cycles 200]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

from benchmark_results import Run, Table, add_arguments, servers_of, shorten, spread, summary

Cycle = Callable[[], None]


@dataclass
class Case:
    backend: str
    label: str
    role: str  # "adapter", "floor" or "peer"
    cycle: Cycle
    samples: list[float] = field(default_factory=list)


def url(backend: str, default: str) -> str:
    return os.environ.get(f"FIREFLY_TEST_{backend.upper()}_URL", default)


POSTGRES = url("postgres", "postgresql://postgres@127.0.0.1:5432/test")
MYSQL = url("mysql", "mysql://root@127.0.0.1:3306/test")
REDIS = url("redis", "redis://127.0.0.1:6379/0")
MEMCACHED = url("memcached", "memcached://127.0.0.1:11211")
ETCD = url("etcd", "etcd://127.0.0.1:2379")


def lock_cycle(lock: Any, name: str, ttl: float = 30.0) -> Cycle:
    """One cycle of any DistributedLock: acquire (must win) then release."""

    def cycle() -> None:
        if not lock.try_acquire(name, ttl):
            raise RuntimeError(f"{lock!r} did not win uncontended {name!r}")
        lock.release(name)

    return cycle


def require(condition: bool, message: str) -> None:
    """A benchmark that silently measures a failing cycle would report nonsense."""
    if not condition:
        raise RuntimeError(message)


def unique(prefix: str) -> str:
    return f"bench:{prefix}:{uuid.uuid4().hex[:8]}"


# -- PostgreSQL -----------------------------------------------------------------------


def postgres_cases(stack: ExitStack) -> Iterator[Case]:
    import psycopg  # noqa: PLC0415 - optional benchmark dependency

    from firefly_scheduling_postgres import PgAdvisoryLock  # noqa: PLC0415

    lock = PgAdvisoryLock(POSTGRES)
    stack.callback(lock.close)
    yield Case("postgres", "PgAdvisoryLock", "adapter", lock_cycle(lock, unique("pg")))

    raw = psycopg.connect(POSTGRES, autocommit=True)
    stack.callback(raw.close)
    key = PgAdvisoryLock.key(unique("pg-raw"))

    def floor() -> None:
        won = raw.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
        require(won == (True,), "raw pg_try_advisory_lock lost an uncontended key")
        raw.execute("SELECT pg_advisory_unlock(%s)", (key,)).fetchone()

    yield Case("postgres", "psycopg: try_advisory_lock + unlock", "floor", floor)

    try:
        import pals  # noqa: PLC0415

        locker = pals.Locker("bench", POSTGRES.replace("postgresql://", "postgresql+psycopg://"))
        pals_lock = locker.lock(unique("pals"), blocking=False)

        def pals_cycle() -> None:
            require(bool(pals_lock.acquire()), "uncontended cycle failed")
            pals_lock.release()

        yield Case("postgres", "pals", "peer", pals_cycle)
    except ImportError:
        pass
    yield from tooz_case(stack, "postgres", POSTGRES)


# -- MySQL / MariaDB --------------------------------------------------------------------


def mysql_cases(stack: ExitStack) -> Iterator[Case]:
    import pymysql  # noqa: PLC0415

    from firefly_scheduling_mysql import MySqlNamedLock  # noqa: PLC0415

    lock = MySqlNamedLock(MYSQL)
    stack.callback(lock.close)
    yield Case("mysql", "MySqlNamedLock", "adapter", lock_cycle(lock, unique("my")))

    from urllib.parse import urlsplit  # noqa: PLC0415

    parts = urlsplit(MYSQL)
    raw = pymysql.connect(
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 3306,
        user=parts.username or "root",
        password=parts.password or "",
        database=parts.path.lstrip("/") or None,
        autocommit=True,
    )
    stack.callback(raw.close)
    name = MySqlNamedLock.server_name(unique("my-raw"))

    def floor() -> None:
        with raw.cursor() as cursor:
            cursor.execute("SELECT GET_LOCK(%s, 0)", (name,))
            require(bool(cursor.fetchone() == (1,)), "uncontended cycle failed")
            cursor.execute("SELECT RELEASE_LOCK(%s)", (name,))
            cursor.fetchone()

    yield Case("mysql", "pymysql: GET_LOCK + RELEASE_LOCK", "floor", floor)
    yield from tooz_case(stack, "mysql", MYSQL)


# -- Redis --------------------------------------------------------------------------------


def redis_cases(stack: ExitStack) -> Iterator[Case]:
    import redis  # noqa: PLC0415

    from firefly_scheduling_redis import RedisLock  # noqa: PLC0415

    lock = RedisLock(REDIS)
    stack.callback(lock.close)
    yield Case("redis", "RedisLock", "adapter", lock_cycle(lock, unique("redis")))

    client = redis.Redis.from_url(REDIS)
    stack.callback(client.close)
    release = client.register_script(
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) "
        "else return 0 end"
    )
    key = "firefly:scheduling:lock:" + unique("redis-raw")

    def floor() -> None:
        token = os.urandom(16).hex()
        require(bool(client.set(key, token, nx=True, px=30_000)), "uncontended cycle failed")
        release(keys=[key], args=[token])

    yield Case("redis", "redis-py: SET NX PX + EVALSHA", "floor", floor)

    redis_py_lock = client.lock(unique("redis-py-lock"), timeout=30)

    def redis_py_cycle() -> None:
        require(bool(redis_py_lock.acquire(blocking=False)), "uncontended cycle failed")
        redis_py_lock.release()

    yield Case("redis", "redis-py Lock", "peer", redis_py_cycle)

    try:
        import redis_lock  # noqa: PLC0415

        prl = redis_lock.Lock(client, unique("python-redis-lock"), expire=30)

        def prl_cycle() -> None:
            require(bool(prl.acquire(blocking=False)), "uncontended cycle failed")
            prl.release()

        yield Case("redis", "python-redis-lock", "peer", prl_cycle)
    except ImportError:
        pass
    yield from tooz_case(stack, "redis", REDIS)


# -- memcached ------------------------------------------------------------------------------


def memcached_cases(stack: ExitStack) -> Iterator[Case]:
    from firefly_scheduling_memcached import MemcachedLock  # noqa: PLC0415

    lock = MemcachedLock(MEMCACHED)
    stack.callback(lock.close)
    yield Case("memcached", "MemcachedLock", "adapter", lock_cycle(lock, unique("mc")))
    yield from memcached_floor(stack)
    yield from tooz_case(stack, "memcached", MEMCACHED)


def memcached_floor(stack: ExitStack) -> Iterator[Case]:
    from urllib.parse import urlsplit  # noqa: PLC0415

    from pymemcache.client.base import Client  # noqa: PLC0415

    parts = urlsplit(MEMCACHED)
    # The same socket options as the adapter (TCP_NODELAY, timeouts): only our code differs.
    client = Client(
        (parts.hostname or "127.0.0.1", parts.port or 11211),
        no_delay=True,
        default_noreply=False,
        connect_timeout=3.0,
        timeout=3.0,
    )
    stack.callback(client.close)
    key = "firefly:scheduling:lock:" + unique("mc-raw")

    def floor() -> None:
        token = os.urandom(16).hex().encode()
        require(bool(client.add(key, token, expire=30, noreply=False)), "uncontended cycle failed")
        value, cas = client.gets(key)
        require(bool(value == token), "uncontended cycle failed")
        # Compare-and-swap delete through the meta protocol: md <key> C<cas>
        client.raw_command(f"md {key} C{cas.decode()}".encode(), b"\r\n")

    yield Case("memcached", "pymemcache: add + gets + md C<cas>", "floor", floor)


# -- etcd ------------------------------------------------------------------------------------


def etcd_cases(stack: ExitStack) -> Iterator[Case]:
    """EtcdLock, and the same four requests sent raw with http.client, httpx and etcd3gw.

    A won cycle is a linearizable read of the key, a lease grant, the create-if-absent
    transaction and a lease revoke. The bodies are written out here, not taken from
    the adapter, so the floor is what a hand-written client would send. The floor is
    the standard library's `http.client`, the synchronous lock's own transport; httpx
    (the asyncio lock's) and etcd3gw are peers.
    """
    import base64  # noqa: PLC0415
    import http.client  # noqa: PLC0415
    import json  # noqa: PLC0415
    from urllib.parse import urlsplit  # noqa: PLC0415

    import httpx  # noqa: PLC0415

    from firefly_scheduling_etcd import EtcdLock  # noqa: PLC0415

    lock = EtcdLock(ETCD)
    stack.callback(lock.close)
    yield Case("etcd", "EtcdLock", "adapter", lock_cycle(lock, unique("etcd")))

    parts = urlsplit(ETCD)
    host, port = parts.hostname or "127.0.0.1", parts.port or 2379

    def requests_of(name: str) -> Callable[[], list[tuple[str, dict[str, Any]]]]:
        key = base64.b64encode(f"firefly/scheduling/lock/{name}".encode()).decode()

        def cycle_requests() -> list[tuple[str, dict[str, Any]]]:
            owner = os.urandom(16).hex()
            lease = str(random.getrandbits(62) + 1)
            create = {"key": key, "value": base64.b64encode(owner.encode()).decode()}
            absent = {"key": key, "target": "CREATE", "result": "EQUAL", "create_revision": "0"}
            return [
                ("kv/range", {"key": key, "count_only": True}),
                ("lease/grant", {"ID": lease, "TTL": "30"}),
                (
                    "kv/txn",
                    {
                        "compare": [absent],
                        "success": [{"request_put": {**create, "lease": lease}}],
                    },
                ),
                ("lease/revoke", {"ID": lease}),
            ]

        return cycle_requests

    connection = http.client.HTTPConnection(host, port, timeout=3.0)
    stack.callback(connection.close)
    plain_requests = requests_of(unique("etcd-http-client"))
    headers = {"Content-Type": "application/json"}

    def http_client_floor() -> None:
        for path, body in plain_requests():
            connection.request("POST", f"/v3/{path}", json.dumps(body), headers)
            answer = json.loads(connection.getresponse().read())
            if path == "kv/txn":
                require(answer.get("succeeded") is True, "uncontended cycle failed")

    yield Case("etcd", "http.client: range + grant + txn + revoke", "floor", http_client_floor)

    client = httpx.Client(base_url=f"http://{host}:{port}/v3/", timeout=3.0, trust_env=False)
    stack.callback(client.close)
    httpx_requests = requests_of(unique("etcd-httpx"))

    def httpx_cycle() -> None:
        for path, body in httpx_requests():
            answer = client.post(path, content=json.dumps(body)).json()
            if path == "kv/txn":
                require(answer.get("succeeded") is True, "uncontended cycle failed")

    yield Case("etcd", "httpx: range + grant + txn + revoke", "peer", httpx_cycle)

    try:
        import etcd3gw  # noqa: PLC0415
    except ImportError:
        return
    gateway = etcd3gw.client(host=host, port=port, timeout=3, api_path="/v3/")
    stack.callback(gateway.session.close)
    gateway_requests = requests_of(unique("etcd3gw"))

    def etcd3gw_cycle() -> None:
        for path, body in gateway_requests():
            answer = gateway.post(gateway.get_url(path), json=body)
            if path == "kv/txn":
                require(answer.get("succeeded") is True, "uncontended cycle failed")

    yield Case("etcd", "etcd3gw: range + grant + txn + revoke", "peer", etcd3gw_cycle)


# -- database (SQLAlchemy) --------------------------------------------------------------------


def database_cases(stack: ExitStack) -> Iterator[Case]:
    from firefly_scheduling_database import DatabaseLeaseLock  # noqa: PLC0415

    sqlite_path = stack.enter_context(tempfile.TemporaryDirectory()) + "/bench.sqlite3"
    urls = {
        "database/sqlite": f"sqlite:///{sqlite_path}",
        "database/postgres": POSTGRES.replace("postgresql://", "postgresql+psycopg://", 1),
        "database/mariadb": MYSQL.replace("mysql://", "mysql+pymysql://", 1),
    }
    for backend, database_url in urls.items():
        lock = DatabaseLeaseLock(database_url)
        lock.install()
        stack.callback(lock.close)
        yield Case(backend, "DatabaseLeaseLock", "adapter", lock_cycle(lock, unique("db")))
        yield database_floor(stack, backend, lock)


def database_floor(stack: ExitStack, backend: str, lock: Any) -> Case:
    """The raw DBAPI connection sending the adapter's own statements (upsert, DELETE).

    The statements are read from the lock (private attributes, on purpose): the floor
    must send exactly what the adapter sends, in the driver's own paramstyle, with a
    commit after each, and no pool or SQLAlchemy layer in between.
    """
    sql = lock._sql  # private on purpose: the exact statements
    raw = lock._bind.raw_connection()
    stack.callback(raw.close)
    connection = raw.dbapi_connection
    cursor = connection.cursor()
    key = sql.key(unique("db-raw"))
    ttl = sql.ttl(30.0)

    def floor() -> None:
        owner = os.urandom(16).hex()
        acquire = {"name": key, "owner": owner, "ttl": ttl}
        cursor.execute(sql.acquire.driver_sql, sql.acquire.driver_parameters(acquire))
        require(cursor.rowcount >= 1, "raw upsert lost an uncontended name")
        connection.commit()
        release = {"name": key, "owner": owner}
        cursor.execute(sql.release.driver_sql, sql.release.driver_parameters(release))
        connection.commit()

    return Case(backend, "DBAPI: the adapter's upsert + DELETE, commit each", "floor", floor)


# -- tooz -----------------------------------------------------------------------------------


def tooz_case(stack: ExitStack, backend: str, server_url: str) -> Iterator[Case]:
    try:
        from tooz import coordination  # noqa: PLC0415
    except ImportError:
        return
    tooz_url = {
        "postgres": server_url,
        "mysql": server_url,
        "redis": server_url.removesuffix("/0"),
        "memcached": server_url,
    }[backend]
    coordinator = coordination.get_coordinator(tooz_url, f"bench-{uuid.uuid4().hex[:6]}".encode())
    coordinator.start()
    stack.callback(coordinator.stop)
    tooz_lock = coordinator.get_lock(unique("tooz").encode())

    def cycle() -> None:
        require(bool(tooz_lock.acquire(blocking=False)), "uncontended cycle failed")
        tooz_lock.release()

    yield Case(backend, f"tooz {backend} driver", "peer", cycle)


# -- harness --------------------------------------------------------------------------------

SUITES: dict[str, Callable[[ExitStack], Iterator[Case]]] = {
    "postgres": postgres_cases,
    "mysql": mysql_cases,
    "redis": redis_cases,
    "memcached": memcached_cases,
    "etcd": etcd_cases,
    "database": database_cases,
}


@contextmanager
def gathered(selected: list[str]) -> Iterator[list[Case]]:
    with ExitStack() as stack:
        cases: list[Case] = []
        for suite in selected:
            try:
                cases.extend(SUITES[suite](stack))
            except Exception as err:  # noqa: BLE001 - report and go on with the other suites
                print(f"# {suite}: not measured ({type(err).__name__}: {err})")
        yield cases


def measure(cases: list[Case], rounds: int, cycles: int) -> None:
    for case in cases:  # warm up connections, statement caches, script SHAs
        for _ in range(max(10, cycles // 10)):
            case.cycle()
    for _ in range(rounds):
        for case in random.sample(cases, len(cases)):
            started = time.perf_counter()
            for _ in range(cycles):
                case.cycle()
            case.samples.append((time.perf_counter() - started) / cycles * 1e6)


COLUMNS = [
    "backend",
    "implementation",
    "role",
    "µs per cycle, median (range) over rounds",
    "ratio to floor",
]
ROLE_ORDER = {"adapter": 0, "floor": 1, "peer": 2}


def figures(cases: list[Case]) -> list[dict[str, object]]:
    floors = {c.backend: statistics.median(c.samples) for c in cases if c.role == "floor"}
    every: list[dict[str, object]] = []
    for case in sorted(cases, key=lambda c: (c.backend, ROLE_ORDER[c.role], c.label)):
        median = statistics.median(case.samples)
        floor = floors.get(case.backend)
        every.append(
            {
                "backend": case.backend,
                "implementation": case.label,
                "role": case.role,
                "microseconds_per_cycle": summary(case.samples),
                "ratio_to_floor": median / floor if floor else None,
            }
        )
    return every


def report(every: list[dict[str, Any]]) -> Table:
    table = Table("Acquire + release cycle, uncontended", COLUMNS, align="lllrr")
    for figure in every:
        cycle = figure["microseconds_per_cycle"]
        samples = [cycle["min"], cycle["median"], cycle["max"]]
        ratio = figure["ratio_to_floor"]
        table.rows.append(
            [
                figure["backend"],
                figure["implementation"],
                figure["role"],
                spread(samples if cycle["runs"] > 1 else samples[1:2], 0),
                "n/a" if ratio is None else f"{ratio:.2f}",
            ]
        )
    print("| " + " | ".join(COLUMNS) + " |")
    for cells in table.rows:
        print("| " + " | ".join(cells) + " |")
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument("--only", action="append", choices=sorted(SUITES), default=None)
    add_arguments(parser)
    args = parser.parse_args()
    shorten(args, parser, rounds=2, cycles=20)
    selected = args.only or list(SUITES)
    run = Run("locks", args, parser, servers=servers_of(selected), uv_groups=("bench",))
    with gathered(selected) as cases:
        measure(cases, args.rounds, args.cycles)
        every = figures(cases)
    run.write(
        "Lock cycle: adapters, raw-driver floors and peers",
        [report(every)],
        every,
        notes=[
            f"Every case in one process, {args.rounds} interleaved rounds of {args.cycles} "
            "cycles (a fresh random order each round); median and range of the rounds.",
            "floor: the raw driver sending the statements the adapter sends for one cycle, "
            "on one reused connection; ratio to floor is the adapter's (or peer's) overhead. "
            "Peers are measured only when installed (`uv sync --all-packages --group bench`).",
        ],
    )


if __name__ == "__main__":
    main()
