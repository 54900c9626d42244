"""Where a fleet of `benchmarks/fleet.py` runs: each backend's provider environment.

Also the server ports its nodes' connections are counted on, the SQL schema a
`database` provider needs first, and the history scene of a fleet back from an
outage. `benchmarks/fire_cost.py` starts its nodes on the same environments.
"""

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit


def url(name: str, default: str) -> str:
    return os.environ.get(f"FIREFLY_TEST_{name.upper()}_URL", default)


def backend_env(backend: str, scratch: Path) -> tuple[dict[str, str], frozenset[int]]:
    """The provider environment of `backend`, and the server ports to count connections to."""
    postgres = url("postgres", "postgresql://postgres@127.0.0.1:5432/test")
    mysql = url("mysql", "mysql://root@127.0.0.1:3306/test")
    table = {
        "postgres": ("postgres", postgres),
        "mysql": ("mysql", mysql),
        "redis": ("redis", url("redis", "redis://127.0.0.1:6379/0")),
        "redis-cluster": ("redis", url("redis_cluster", "redis+cluster://127.0.0.1:7000")),
        "memcached": ("memcached", url("memcached", "memcached://127.0.0.1:11211")),
        "etcd": ("etcd", url("etcd", "etcd://127.0.0.1:2379")),
        "database-sqlite": ("database", f"sqlite:///{scratch / 'fleet.sqlite'}"),
        "database-postgres": (
            "database",
            postgres.replace("postgresql://", "postgresql+psycopg://"),
        ),
        "database-mysql": ("database", mysql.replace("mysql://", "mysql+pymysql://")),
    }
    provider, server = table[backend]
    env = {
        "FIREFLY_SCHEDULING_LOCK_PROVIDER": provider,
        f"FIREFLY_SCHEDULING_LOCK_{provider.upper()}_URL": server,
    }
    if backend == "redis-cluster":
        return env, _cluster_ports(server)
    port = urlsplit(server).port
    return env, frozenset() if port is None else frozenset({port})


def _cluster_ports(server: str) -> frozenset[int]:
    """Every node's port: a node connects to each primary it sends commands to."""
    import redis.cluster  # noqa: PLC0415 - only the cluster fleet needs it

    client = redis.cluster.RedisCluster.from_url(server.replace("redis+cluster://", "redis://"))
    try:
        nodes = client.get_nodes()  # type: ignore[no-untyped-call]
        return frozenset(int(node.port) for node in nodes)
    finally:
        client.close()


def end_outage(provider_env: dict[str, str], tasks: int, seconds: int) -> None:
    """Make each task's newest history record a run `seconds` ago, and the only one.

    The scene of a whole fleet back from an outage of that length: each node's first
    fire of a task records the fires since as "no node ran it" (the boot catch-up).
    Needs a backend whose run history is kept by default (the SQL ones).
    """
    from firefly_scheduling.history.port import RunState  # noqa: PLC0415 - only here
    from firefly_scheduling.history.selection import resolve_history  # noqa: PLC0415
    from firefly_scheduling.settings import Settings  # noqa: PLC0415
    from firefly_scheduling_database.sql_history.store import SqlRunHistory  # noqa: PLC0415

    history = resolve_history(Settings.from_env(provider_env))
    if not isinstance(history, SqlRunHistory):
        raise SystemExit(f"--outage needs a SQL run history; this backend keeps {history!r}")
    try:
        targets = [f"fleet_tasks_{tasks}:task_{index}" for index in range(tasks)]
        runs = history.table
        with history.engine.begin() as connection:
            connection.execute(runs.delete().where(runs.c.task.in_(targets)))
        at = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=seconds)
        for target in targets:
            history.start(target, at, lock=target, node="before-the-outage", token=None, at=at)
            history.finish(
                target, at, lock=target, token=None, state=RunState.SUCCEEDED, error=None, at=at
            )
    finally:
        history.close()


def migrate(provider_env: dict[str, str]) -> None:
    database_url = provider_env["FIREFLY_SCHEDULING_LOCK_DATABASE_URL"]
    subprocess.run(
        [str(Path(sys.executable).parent / "firefly-scheduling"), "migrate", "--url", database_url],
        check=True,
        capture_output=True,
    )
