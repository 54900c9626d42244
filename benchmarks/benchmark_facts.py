"""The facts a benchmark's results page states about its run, beside the figures.

The commit measured (and whether the code in the work tree differed from it), the
machine (CPU model, cores, memory, kernel, Python) and the version each server
reports: what the figures depend on, read once at the start of a run (see
`benchmark_results.Run`).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

REPOSITORY = Path(__file__).resolve().parent.parent
#: What a benchmark's figures depend on, for "uncommitted changes" in its results.
MEASURED_PATHS = ("packages", "benchmarks", "pyproject.toml", "uv.lock")


def commit() -> dict[str, Any]:
    """The commit measured, and whether its code in the work tree differed from it."""

    def git(*arguments: str) -> str:
        return subprocess.run(
            ["git", *arguments], cwd=REPOSITORY, capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        head = git("rev-parse", "HEAD")
        # Only the code measured counts: the results files a run rewrites, and docs
        # edited meanwhile, change no figure.
        status = git("status", "--porcelain", "--", *MEASURED_PATHS).splitlines()
        changed = [line for line in status if line.strip()]
    except (OSError, subprocess.CalledProcessError):
        return {"hash": None, "uncommitted_changes": None}
    return {"hash": head, "uncommitted_changes": bool(changed)}


def machine() -> dict[str, Any]:
    """What the figures depend on: CPU, cores, memory, kernel, Python."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory_kib = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory_kib = int(line.split()[1])
                break
    except OSError:
        pass
    return {
        "cpu_model": model or platform.processor() or "unknown",
        "cpus": os.cpu_count(),
        "memory_gib": round(memory_kib / 1024 / 1024, 1) if memory_kib else None,
        "system": platform.platform(),
        "python": platform.python_version(),
    }


def server_versions(kinds: Iterable[str]) -> dict[str, str]:
    """The version each server of `kinds` reports (postgres, mysql, redis, memcached,
    etcd), read from the `FIREFLY_TEST_*_URL` servers the benchmarks use by default;
    a server that does not answer is reported as such, not left out."""
    readers: dict[str, Callable[[], str]] = {
        "postgres": _postgres_version,
        "mysql": _mysql_version,
        "redis": _redis_version,
        "memcached": _memcached_version,
        "etcd": _etcd_version,
    }
    versions = {}
    for kind in sorted(set(kinds)):
        try:
            versions[kind] = readers[kind]()
        except Exception as err:  # noqa: BLE001 - a fact of the run, reported as it is
            versions[kind] = f"unknown ({type(err).__name__})"
    return versions


#: The server each backend name of the benchmarks talks to (SQLite and memory: none).
SERVER_OF = {
    "postgres": "postgres",
    "database-postgres": "postgres",
    "mysql": "mysql",
    "database-mysql": "mysql",
    "database-mariadb": "mysql",
    "redis": "redis",
    "redis-cluster": "redis",
    "redis_cluster": "redis",
    "memcached": "memcached",
    "etcd": "etcd",
}


def servers_of(backends: Iterable[str]) -> list[str]:
    return sorted({SERVER_OF[b] for b in backends if b in SERVER_OF})


def _url(kind: str, default: str) -> str:
    return os.environ.get(f"FIREFLY_TEST_{kind.upper()}_URL", default)


def _postgres_version() -> str:
    import psycopg  # noqa: PLC0415

    url = _url("postgres", "postgresql://postgres@127.0.0.1:5432/test")
    with psycopg.connect(url, connect_timeout=3) as connection:
        row = connection.execute("SHOW server_version").fetchone()
    return f"PostgreSQL {row[0] if row else '?'}"


def _mysql_version() -> str:
    import pymysql  # noqa: PLC0415

    parts = urlsplit(_url("mysql", "mysql://root@127.0.0.1:3306/test"))
    connection = pymysql.connect(
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 3306,
        user=parts.username or "root",
        password=parts.password or "",
        connect_timeout=3,
    )
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT VERSION()")
            row = cursor.fetchone()
    finally:
        connection.close()
    text = str(row[0]) if row else "?"
    return f"MariaDB {text}" if "mariadb" in text.lower() else f"MySQL {text}"


def _redis_version() -> str:
    import redis  # noqa: PLC0415

    client = redis.Redis.from_url(_url("redis", "redis://127.0.0.1:6379/0"), socket_timeout=3)
    try:
        return f"Redis {client.info('server')['redis_version']}"
    finally:
        client.close()


def _memcached_version() -> str:
    import socket  # noqa: PLC0415

    parts = urlsplit(_url("memcached", "memcached://127.0.0.1:11211"))
    with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 11211), 3) as s:
        s.sendall(b"version\r\n")
        answer = s.recv(256).decode().split()
    return f"memcached {answer[1] if len(answer) > 1 else '?'}"


def _etcd_version() -> str:
    import http.client  # noqa: PLC0415

    parts = urlsplit(_url("etcd", "etcd://127.0.0.1:2379"))
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 2379, 3)
    try:
        connection.request("GET", "/version")
        answer = json.loads(connection.getresponse().read())
    finally:
        connection.close()
    return f"etcd {answer.get('etcdserver', '?')}"
