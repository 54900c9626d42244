"""Real servers for the integration suite.

URLs come from `FIREFLY_TEST_<BACKEND>_URL` (see `firefly_scheduling.testing.servers`);
`.ci/run` exports them for the servers it starts or checks. Where a variable is
missing and a Docker engine answers, testcontainers starts the server instead.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from firefly_scheduling.testing.servers import register_container_cleanup, server_url


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


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """libpq URL of a real PostgreSQL server."""
    return server_url("postgres", _container("postgres"))


@pytest.fixture(scope="session")
def mysql_url() -> str:
    """`mysql://` URL of a real MySQL or MariaDB server."""
    return server_url("mysql", _container("mysql"))


@pytest.fixture(scope="session")
def redis_url() -> str:
    return server_url("redis", _container("redis"))


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
