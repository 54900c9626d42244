"""Real servers for the integration suite.

URLs come from `FIREFLY_TEST_<BACKEND>_URL` (see `firefly_scheduling.testing.servers`);
`.ci/run` exports them for the servers it starts or checks. Where a variable is
missing and a Docker engine answers, testcontainers starts the server instead.
"""

from __future__ import annotations

import signal
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
import redis
from psycopg import sql

from chaos_harness.proxy import FaultyProxy
from firefly_scheduling.testing.servers import register_container_cleanup, server_url
from firefly_scheduling_database.engine import lock_engine
from firefly_scheduling_database.sql_history.migration import upgrade_history_table
from firefly_scheduling_database.sql_history.schema import DEFAULT_TABLE as DEFAULT_HISTORY_TABLE
from firefly_scheduling_database.sql_history.store import SqlRunHistory
from firefly_scheduling_redis.url import parse_url as parse_redis_url

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent / "host_apps"))
from fresh_tables import installed_history, private_mysql_database
from proxies import proxied
from session_killers import CONNECTION_KILLS, KillableServer


def _container(kind: str) -> Callable[[], str]:
    """Start a throwaway server with testcontainers and return its URL."""

    def start() -> str:
        from testcontainers.core.container import DockerContainer  # noqa: PLC0415
        from testcontainers.core.waiting_utils import wait_for_logs  # noqa: PLC0415

        image, port, scheme, ready, env = {
            "postgres": (
                "postgres:17",
                5432,
                "postgresql://postgres:test@{}:{}/postgres",
                "ready to accept connections",
                {"POSTGRES_PASSWORD": "test"},
            ),
            "mysql": (
                "mariadb:11",
                3306,
                "mysql://root:test@{}:{}/mysql",
                "ready for connections",
                {"MARIADB_ROOT_PASSWORD": "test"},
            ),
            "redis": ("redis:7", 6379, "redis://{}:{}/0", "Ready to accept connections", {}),
            "memcached": ("memcached:1.6", 11211, "memcached://{}:{}", "", {}),
        }[kind]
        container = DockerContainer(image).with_exposed_ports(port)
        for key, value in env.items():
            container = container.with_env(key, value)
        container.start()
        register_container_cleanup(container.stop)
        if ready:
            wait_for_logs(container, ready, timeout=60)
        return scheme.format(container.get_container_host_ip(), container.get_exposed_port(port))

    return start


def _current_history_table(url: str) -> str:
    """Bring the server's default run-history table to this version's shape; `url`.

    Tests and the hosts they start use the default `firefly_scheduling_runs` table in
    the shared `test` database, where an older checkout may have created it in the
    0.1.0 shape, which this version refuses at boot. Upgrading it here (idempotent,
    `firefly-scheduling migrate --history`'s code) makes the suite deterministic
    whatever ran on the server before; a 0.1.0 node can still write to the result.
    """
    engine = lock_engine(url)
    try:
        upgrade_history_table(engine, DEFAULT_HISTORY_TABLE)
    finally:
        engine.dispose()
    return url


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """libpq URL of a real PostgreSQL server (its default history table is current)."""
    return _current_history_table(server_url("postgres", _container("postgres")))


@pytest.fixture(scope="session")
def mysql_url() -> str:
    """`mysql://` URL of a real MySQL or MariaDB server (its default history table is current)."""
    return _current_history_table(server_url("mysql", _container("mysql")))


@pytest.fixture(scope="session")
def redis_url() -> str:
    return server_url("redis", _container("redis"))


@pytest.fixture
def proxied_redis_url(redis_url: str) -> Iterator[tuple[str, FaultyProxy]]:
    """The shared Redis through a fault-injecting proxy of the test's own, and the proxy."""
    with proxied(redis_url) as found:
        yield found


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    """A plain client of the shared Redis, to read what the locks wrote as an operator would."""
    client = redis.Redis.from_url(parse_redis_url(redis_url).driver_url)
    yield client
    client.close()


@pytest.fixture(scope="session")
def redis_cluster_url() -> str:
    """`redis+cluster://` URL of one node of a real Redis Cluster (no container image)."""
    return server_url("redis_cluster")


@pytest.fixture(scope="session")
def memcached_url() -> str:
    return server_url("memcached", _container("memcached"))


@pytest.fixture(scope="session")
def etcd_url() -> str:
    """`etcd://` URL of a real etcd member (no container image is wired up for it)."""
    return server_url("etcd")


@pytest.fixture
def history(postgres_url: str) -> Iterator[SqlRunHistory]:
    """A run history on a fresh table of the PostgreSQL test database, dropped after;
    read as a second client would (a module needing another defines its own)."""
    with installed_history(postgres_url) as store:
        yield store


@pytest.fixture(params=sorted(CONNECTION_KILLS))
def killable_server(request: pytest.FixtureRequest) -> KillableServer:
    """Each SQL server whose connections a test ends from a second client."""
    return KillableServer(request.param, str(request.getfixturevalue(request.param)))


@pytest.fixture
def postgres_schema_url(postgres_url: str) -> Iterator[str]:
    """A database-provider URL whose sessions live in a fresh schema, dropped afterwards."""
    schema = f"firefly_migrate_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    try:
        options = f"-c search_path={schema}".replace(" ", "%20").replace("=", "%3D")
        yield f"{postgres_url}{'&' if '?' in postgres_url else '?'}options={options}"
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture
def mysql_database_url(mysql_url: str) -> Iterator[str]:
    """A URL on a fresh, empty MySQL/MariaDB database, dropped afterwards."""
    with private_mysql_database(mysql_url) as url:
        yield url


@pytest.fixture(autouse=True)
def _restore_stop_signals() -> Iterator[None]:
    """Leave SIGTERM/SIGINT as found: a host run in-process ignores them once stopped,
    and later child processes would inherit that and could not be terminated."""
    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


@pytest.fixture(params=["sqlite", "postgres", "mysql"])
def sql_history_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A run history's URL on each SQL server in turn: a SQLite file, PostgreSQL, MariaDB."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'history.db'}"
    return str(request.getfixturevalue(f"{request.param}_url"))
