"""The one list of lock backends the integration suite races, and how each is reached.

A backend is a lock provider (`postgres`, `redis`...) on its own server, or
`database-<server>`: the SQLAlchemy provider on SQLite (a file in the case's folder),
PostgreSQL or MariaDB. Tests that race whole nodes parametrise over `BACKENDS` (or
the session/lease halves of it) and build each node's lock from `lock_url`, so a new
backend is added here once and every race runs on it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Final

import pytest

from firefly_scheduling.settings import Settings
from firefly_scheduling_database import DatabaseLeaseLock

#: Backends whose lock is a server session: it ends with its connection, not at a TTL.
SESSION_BACKENDS: Final = ("postgres", "mysql")
#: Backends whose lock is a lease that ends at its TTL unless renewed.
LEASE_BACKENDS: Final = (
    "redis",
    "memcached",
    "etcd",
    "database-sqlite",
    "database-postgres",
    "database-mariadb",
)
#: Every backend with real exclusion, on one server each.
BACKENDS: Final = (*SESSION_BACKENDS, *LEASE_BACKENDS)
#: `BACKENDS` and Redis Cluster (three masters), for the races that also run there.
BACKENDS_WITH_CLUSTER: Final = (*SESSION_BACKENDS, "redis", "redis-cluster", *LEASE_BACKENDS[1:])

#: The server behind each `database-<server>` backend (SQLite needs none).
_DATABASE_SERVERS: Final = {"postgres": "postgres", "mariadb": "mysql"}


def _server_of(backend: str) -> str | None:
    provider, _, server = backend.partition("-")
    if provider == "database":
        return _DATABASE_SERVERS.get(server)
    return backend


def server_urls(request: pytest.FixtureRequest, backends: Iterable[str]) -> dict[str, str]:
    """The URL of every server `backends` reach, by server name (`redis-cluster`...)."""
    servers = {server for server in map(_server_of, backends) if server is not None}
    return {
        server: request.getfixturevalue(f"{server.replace('-', '_')}_url")
        for server in sorted(servers)
    }


def lock_url(backend: str, urls: dict[str, str], workdir: Path) -> tuple[str, str]:
    """`(provider, URL)` of `backend`'s lock; a SQLite database lives in `workdir`."""
    provider, _, server = backend.partition("-")
    if provider != "database":
        return provider, urls[backend]
    if server == "sqlite":
        return provider, f"sqlite:///{workdir / 'locks.db'}"
    return provider, urls[_DATABASE_SERVERS[server]]


def install_tables(backend: str, urls: dict[str, str], workdir: Path) -> None:
    """Create the database provider's tables, as `firefly-scheduling migrate` does once."""
    provider, url = lock_url(backend, urls, workdir)
    if provider == "database":
        lock = DatabaseLeaseLock(url)
        try:
            lock.install()
        finally:
            lock.close()


def lock_env(backend: str, urls: dict[str, str], workdir: Path) -> dict[str, str]:
    """The environment variables choosing `backend`'s lock, its tables installed."""
    install_tables(backend, urls, workdir)
    provider, url = lock_url(backend, urls, workdir)
    return {
        "FIREFLY_SCHEDULING_LOCK_PROVIDER": provider,
        f"FIREFLY_SCHEDULING_LOCK_{provider.upper()}_URL": url,
    }


def lock_settings(
    backend: str, urls: dict[str, str], workdir: Path, node: str, history_url: str = ""
) -> Settings:
    """A node's settings on `backend`'s lock (`history_url` empty: the lock's database)."""
    provider, url = lock_url(backend, urls, workdir)
    return Settings(
        lock_provider=provider, lock_urls={provider: url}, history_url=history_url, node=node
    )
