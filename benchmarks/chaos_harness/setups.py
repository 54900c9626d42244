"""The setups: which provider, which server, how its nodes reach it, how it is faulted."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from chaos_harness.servers import PrivateServer

SETUPS = (
    "postgres",
    "mysql",
    "redis",
    "memcached",
    "etcd",
    "database-sqlite",
    "database-postgres",
    "database-mariadb",
    "effects-postgres",
    "effects-mysql",
    "effects-sqlite",
)


#: Setups whose server keeps nothing across a restart: the `restart` fault destroys
#: every lock and claim (the private Redis runs with an fsynced append-only file).
VOLATILE_SERVERS = frozenset({"memcached"})


@dataclass
class Backend:
    """A setup made concrete for one run.

    `url` is the server's real URL; nodes get it with the host and port of their own
    proxy (`via`). `server` is the private instance a restart may crash; `sessions`
    the dialect whose sessions the nemesis may end on a shared server.
    """

    setup: str
    provider: str
    url: str
    server: PrivateServer | None = None
    sessions: str | None = None
    #: Runs the `effects` tasks: lock, history and application tables in one database.
    effects: bool = False

    @property
    def proxied(self) -> bool:
        return not self.url.startswith("sqlite")

    def target(self) -> tuple[str, int]:
        parts = urlsplit(self.url)
        return parts.hostname or "127.0.0.1", int(parts.port or 0)

    def via(self, port: int) -> str:
        """The URL through a proxy on 127.0.0.1:`port`."""
        if not self.proxied:
            return self.url
        parts = urlsplit(self.url)
        credentials, _, _ = parts.netloc.rpartition("@")
        netloc = f"{credentials}@127.0.0.1:{port}" if credentials else f"127.0.0.1:{port}"
        return urlunsplit(parts._replace(netloc=netloc))

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()


def _shared(name: str) -> str:
    variable = f"FIREFLY_TEST_{name.upper()}_URL"
    url = os.environ.get(variable)
    if not url:
        raise SystemExit(f"chaos: {variable} is not set (eval scripts/ensure-servers)")
    return url


def make_backend(setup: str, workdir: Path) -> Backend:
    """Start what `setup` needs (a private server, the database lock table)."""
    if setup in {"redis", "memcached", "etcd"}:
        server = PrivateServer(setup, workdir).start()
        return Backend(setup, setup, server.url, server=server)
    if setup in {"postgres", "mysql"}:
        return Backend(setup, setup, _shared(setup), sessions=setup)
    if setup.startswith(("database-", "effects-")):
        server_kind = setup.partition("-")[2]
        if server_kind == "sqlite":
            url = f"sqlite:///{workdir / 'locks.db'}"
            sessions = None
        else:
            url = _shared("postgres" if server_kind == "postgres" else "mysql")
            sessions = "postgres" if server_kind == "postgres" else "mysql"
        from firefly_scheduling_database import DatabaseLeaseLock  # noqa: PLC0415 - optional

        lock = DatabaseLeaseLock(url)
        try:
            lock.install()
        finally:
            lock.close()
        effects = setup.startswith("effects-")
        return Backend(setup, "database", url, sessions=sessions, effects=effects)
    raise SystemExit(f"chaos: unknown setup {setup!r}; known: {', '.join(SETUPS)}")
