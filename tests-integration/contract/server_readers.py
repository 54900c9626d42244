"""Second clients of each lock server, for the contract's hostile-name cases.

Each reader talks to the server with a client of its own (sqlite3, psycopg, PyMySQL,
redis-py, a memcached socket, etcd's JSON gateway), on the server's default session
settings, and computes a name's key by the mapping the backend documents, so what
it reads is the server's state, not the lock's belief. Each plants a canary (a
table, a key) that a name run as a statement would destroy, and reads it back in
`fingerprint` with whatever else lies outside the lock's keys.

Only a namespace no other test can write is listed whole (a class's own lease
table); elsewhere the candidate keys the case asks about are read one by one.
"""

from __future__ import annotations

import base64
import socket
import sqlite3
import uuid
from collections.abc import Hashable, Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx
import psycopg
import pymysql
import redis
import redis.cluster

from firefly_scheduling.testing.server_reader import ServerReader
from firefly_scheduling_memcached.protocol import lock_key as memcached_lock_key
from firefly_scheduling_mysql import MySqlNamedLock
from firefly_scheduling_mysql.url import connection_arguments
from firefly_scheduling_postgres import PgAdvisoryLock
from firefly_scheduling_redis.url import parse_url as parse_redis_url

#: The tables each SQL backend creates for itself (fence counters, fire claims).
_OWN_TABLES = frozenset({"firefly_scheduling_fences", "firefly_scheduling_claims"})


def _canary_name() -> str:
    return f"ff_canary_{uuid.uuid4().hex[:12]}"


class _SqlReader(ServerReader):
    """A plain DB-API connection with a canary table; `fingerprint` lists the tables."""

    def __init__(self, connection: Any, placeholder: str) -> None:
        self._connection = connection
        self._placeholder = placeholder
        self.canary = _canary_name()
        self._run(f"CREATE TABLE {self.canary} (id INTEGER PRIMARY KEY, note VARCHAR(20))")
        self._run(f"INSERT INTO {self.canary} VALUES (1, 'canary')")

    def _run(self, sql: str, arguments: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        cursor = self._connection.cursor()
        try:
            cursor.execute(sql.replace("?", self._placeholder), tuple(arguments))
            rows = cursor.fetchall() if cursor.description is not None else []
        finally:
            cursor.close()
        if isinstance(self._connection, sqlite3.Connection):
            self._connection.commit()
        return [tuple(row) for row in rows]

    def _tables(self) -> frozenset[str]:
        raise NotImplementedError

    def fingerprint(self) -> Hashable:
        canary = tuple(self._run(f"SELECT id, note FROM {self.canary}"))
        return canary, frozenset(self._tables() - _OWN_TABLES)

    def close(self) -> None:
        try:
            self._run(f"DROP TABLE IF EXISTS {self.canary}")
        finally:
            self._connection.close()


class LeaseTableReader(_SqlReader):
    """The database provider's lease table, listed whole (each contract class has its own).

    The documented key is the name itself on SQLite and PostgreSQL, and its UTF-8
    bytes on MySQL/MariaDB (a VARBINARY column).
    """

    def __init__(self, url: str, table: str) -> None:
        self._table = table
        scheme = urlsplit(url).scheme
        self._dialect = scheme.partition("+")[0]
        if self._dialect == "sqlite":
            connection: Any = sqlite3.connect(url.partition(":///")[2], timeout=10)
            placeholder = "?"
        elif self._dialect in {"postgresql", "postgres"}:
            connection = psycopg.connect(_libpq_url(url), autocommit=True)
            placeholder = "%s"
        else:
            connection = pymysql.connect(**connection_arguments(_plain_mysql(url)), autocommit=True)
            placeholder = "%s"
        super().__init__(connection, placeholder)

    def key(self, name: str) -> Hashable:
        return name.encode("utf-8") if self._dialect in {"mysql", "mariadb"} else name

    def held(self, candidates: Sequence[Hashable]) -> frozenset[Hashable]:
        rows = self._run(f"SELECT name FROM {self._table}")
        return frozenset(bytes(n) if isinstance(n, bytes | bytearray) else n for (n,) in rows)

    def queued(self, name: str) -> int:
        """The rows of `name` in the waiters' queue table (`<table>_queue`), live or not."""
        rows = self._run(
            f"SELECT count(*) FROM {self._table}_queue WHERE name = ?", [self.key(name)]
        )
        return int(rows[0][0])

    def _tables(self) -> frozenset[str]:
        if self._dialect == "sqlite":
            query = "SELECT name FROM sqlite_master WHERE type = 'table'"
        elif self._dialect in {"postgresql", "postgres"}:
            query = "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
        else:
            query = (
                "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE()"
            )
        return frozenset(str(name) for (name,) in self._run(query))


class AdvisoryLockReader(_SqlReader):
    """PostgreSQL's advisory locks of this database (`pg_locks`), listed whole.

    The documented key is `PgAdvisoryLock.key(name)`, a signed 64-bit integer, which
    `pg_locks` shows as two unsigned halves (objsubid 1).
    """

    def __init__(self, url: str) -> None:
        super().__init__(psycopg.connect(_libpq_url(url), autocommit=True), "%s")

    def key(self, name: str) -> Hashable:
        return PgAdvisoryLock.key(name)

    def held(self, candidates: Sequence[Hashable]) -> frozenset[Hashable]:
        rows = self._run(
            "SELECT classid::bigint, objid::bigint FROM pg_locks WHERE locktype = 'advisory'"
            " AND objsubid = 1 AND granted"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        )
        return frozenset(_signed((high << 32) | low) for high, low in rows)

    def _tables(self) -> frozenset[str]:
        query = "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
        return frozenset(str(name) for (name,) in self._run(query))


class NamedLockReader(_SqlReader):
    """MySQL/MariaDB named locks: `IS_USED_LOCK` of each candidate (the server cannot
    list them without a plugin). The documented key is `MySqlNamedLock.server_name`."""

    def __init__(self, url: str) -> None:
        arguments = connection_arguments(_plain_mysql(url))
        super().__init__(pymysql.connect(**arguments, autocommit=True), "%s")

    def key(self, name: str) -> Hashable:
        return MySqlNamedLock.server_name(name)

    def held(self, candidates: Sequence[Hashable]) -> frozenset[Hashable]:
        return frozenset(
            key
            for key in candidates
            if self._run("SELECT IS_USED_LOCK(?)", (key,))[0][0] is not None
        )

    def _tables(self) -> frozenset[str]:
        query = "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE()"
        return frozenset(str(name) for (name,) in self._run(query))


class RedisReader(ServerReader):
    """Redis or Redis Cluster: `EXISTS` of each candidate key, and a canary key.

    The documented key is `firefly:scheduling:lock:` and the name's UTF-8 bytes on one
    server, `{firefly:scheduling:<name>}:lock` on a cluster.
    """

    def __init__(self, url: str) -> None:
        server = parse_redis_url(url)
        self._cluster = server.cluster
        self._client: Any = (
            redis.cluster.RedisCluster.from_url(server.driver_url)
            if server.cluster
            else redis.Redis.from_url(server.driver_url)
        )
        self.canary = _canary_name()
        self._client.set(self.canary, b"canary", ex=600)

    def key(self, name: str) -> Hashable:
        if self._cluster:
            return ("{firefly:scheduling:" + name + "}:lock").encode("utf-8")
        return ("firefly:scheduling:lock:" + name).encode("utf-8")

    def held(self, candidates: Sequence[Hashable]) -> frozenset[Hashable]:
        return frozenset(key for key in candidates if self._client.exists(key))

    def fingerprint(self) -> Hashable:
        value: bytes | None = self._client.get(self.canary)
        return value

    def close(self) -> None:
        try:
            self._client.delete(self.canary)
        finally:
            self._client.close()


class MemcachedReader(ServerReader):
    """memcached's text protocol on a socket of its own: `get` of each candidate key.

    The documented key is `firefly_scheduling_memcached.protocol.lock_key(name)`: the
    readable form, or a SHA-256 digest for a name memcached cannot carry as it is.
    """

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self._socket = socket.create_connection(
            (parts.hostname or "127.0.0.1", parts.port or 11211), timeout=5
        )
        self._buffer = b""
        self.canary = _canary_name()
        self._command(f"set {self.canary} 0 600 6\r\ncanary\r\n".encode(), b"STORED\r\n")

    def key(self, name: str) -> Hashable:
        return memcached_lock_key(name)

    def held(self, candidates: Sequence[Hashable]) -> frozenset[Hashable]:
        return frozenset(key for key in candidates if self._get(str(key)) is not None)

    def get(self, key: str) -> bytes | None:
        """The value of the item `key`, or None when there is none."""
        return self._get(key)

    def fingerprint(self) -> Hashable:
        return self._get(self.canary)

    def close(self) -> None:
        try:
            self._command(f"delete {self.canary}\r\n".encode(), b"\r\n")
        finally:
            self._socket.close()

    def _get(self, key: str) -> bytes | None:
        reply = self._command(f"get {key}\r\n".encode("ascii"), b"END\r\n")
        if reply == b"END\r\n":
            return None
        header, _, rest = reply.partition(b"\r\n")
        size = int(header.split()[3])
        return rest[:size]

    def _command(self, command: bytes, ending: bytes) -> bytes:
        self._socket.sendall(command)
        while ending not in self._buffer:
            chunk = self._socket.recv(65536)
            if not chunk:
                raise ConnectionError("memcached closed the reader's connection")
            self._buffer += chunk
        reply, _, self._buffer = self._buffer.partition(ending)
        return reply + ending


class EtcdReader(ServerReader):
    """etcd through its JSON gateway: a range read of each candidate key, and a canary.

    The documented key is `firefly/scheduling/lock/` and the name's UTF-8 bytes.
    """

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self._client = httpx.Client(
            base_url=f"http://{parts.hostname or '127.0.0.1'}:{parts.port or 2379}", timeout=5
        )
        self.canary = _canary_name()
        self._post("kv/put", {"key": _b64(self.canary.encode()), "value": _b64(b"canary")})

    def key(self, name: str) -> Hashable:
        return ("firefly/scheduling/lock/" + name).encode("utf-8")

    def held(self, candidates: Sequence[Hashable]) -> frozenset[Hashable]:
        return frozenset(
            key for key in candidates if isinstance(key, bytes) and self._value(key) is not None
        )

    def fingerprint(self) -> Hashable:
        return self._value(self.canary.encode())

    def count_prefix(self, prefix: bytes) -> int:
        """How many keys start with `prefix`."""
        end = prefix[:-1] + bytes([prefix[-1] + 1])
        body = {"key": _b64(prefix), "range_end": _b64(end), "count_only": True}
        return int(self._post("kv/range", body).get("count", 0))

    def close(self) -> None:
        try:
            self._post("kv/deleterange", {"key": _b64(self.canary.encode())})
        finally:
            self._client.close()

    def _value(self, key: bytes) -> bytes | None:
        kvs = self._post("kv/range", {"key": _b64(key)}).get("kvs") or []
        return base64.b64decode(kvs[0].get("value", "")) if kvs else None

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        reply = self._client.post(f"/v3/{path}", json=body)
        reply.raise_for_status()
        document: dict[str, Any] = reply.json()
        return document


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _libpq_url(url: str) -> str:
    """`url` as libpq reads it: without SQLAlchemy's driver suffix or the hostile options."""
    parts = urlsplit(url)
    return parts._replace(scheme="postgresql", query="").geturl()


def _plain_mysql(url: str) -> str:
    """`url` as the mysql provider reads it: `mysql://`, default session settings."""
    parts = urlsplit(url)
    return parts._replace(scheme="mysql", query="").geturl()
