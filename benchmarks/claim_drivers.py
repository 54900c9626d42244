"""The claimers `benchmarks/claims.py` measures, by backend: the adapter and its raw driver.

The adapter claims through `claiming_lock(lock).try_claim`, as a node's fire runner
does; the raw driver sends the SAME statement or command (taken from the adapter's
module) on a connection per thread: the ceiling the adapter is compared with.
`benchmarks/fire_cost.py` reuses the raw drivers. Server URLs come from the
`FIREFLY_TEST_*_URL` variables when this module is imported.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any
from urllib.parse import urlsplit

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
    seconds = claim_seconds()
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
    seconds = claim_seconds()

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
    seconds = claim_seconds()

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

    milliseconds = math.ceil(claim_seconds() * 1000)

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
    expire = math.ceil(claim_seconds()) + 1  # the adapter's rounding (protocol.server_expiry)

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
    ttl = str(lease_seconds(claim_seconds()))
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
    ttl = sql.ttl(claim_seconds())
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


def claim_seconds() -> float:
    return float(os.environ["FIREFLY_BENCH_CLAIM_SECONDS"])
