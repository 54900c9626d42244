"""Each pytest-xdist worker gets databases of its own.

`scripts/test` runs the suite in several worker processes at once. Tests name their
locks and rows uniquely, but some read what a whole database holds (a history table,
the default run table the hosts write to, every row a migration created), so two
workers sharing one database would see each other's rows. Before any test runs, a
worker rewrites its `FIREFLY_TEST_POSTGRES_URL` and `FIREFLY_TEST_MYSQL_URL` to a
database named after it (`test_gw0`, ...), created if missing; the hosts and nodes
the tests start as child processes inherit the rewritten variables. Redis gets a
logical database per worker the same way. xdist also sets `COLUMNS` and `LINES` in
its workers, which would make the CLI's tables wrap where a serial run's do not;
workers drop them. Run without xdist, nothing changes.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pymysql
import pytest
from psycopg import sql

from firefly_scheduling_mysql.url import connection_arguments


def _worker_database(url: str, worker: str) -> tuple[str, str]:
    """`url` pointed at the worker's own database, and that database's name."""
    parts = urlsplit(url)
    name = f"{parts.path.lstrip('/') or 'test'}_{worker}"
    return urlunsplit(parts._replace(path=f"/{name}")), name


def _create_postgres(url: str, name: str) -> None:
    with psycopg.connect(url, autocommit=True) as admin:
        found = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if found is None:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def _create_mysql(url: str, name: str) -> None:
    admin = pymysql.connect(**connection_arguments(url), autocommit=True)
    try:
        with admin.cursor() as cursor:
            cursor.execute(f"CREATE DATABASE IF NOT EXISTS `{name}`")
    finally:
        admin.close()


def pytest_configure(config: pytest.Config) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return
    for variable in ("COLUMNS", "LINES"):
        os.environ.pop(variable, None)
    for variable, create in (
        ("FIREFLY_TEST_POSTGRES_URL", _create_postgres),
        ("FIREFLY_TEST_MYSQL_URL", _create_mysql),
    ):
        url = os.environ.get(variable, "").strip()
        if url:
            worker_url, name = _worker_database(url, worker)
            create(url, name)
            os.environ[variable] = worker_url
    redis = os.environ.get("FIREFLY_TEST_REDIS_URL", "").strip()
    if redis:
        index = int(worker.removeprefix("gw")) + 1
        os.environ["FIREFLY_TEST_REDIS_URL"] = urlunsplit(
            urlsplit(redis)._replace(path=f"/{index}")
        )


# -- tests that start first ---------------------------------------------------------
#
# Under xdist (`--dist loadscope`) a module goes to the next free worker in collection
# order, so a long module collected last ends the run alone. A module marked `early`
# (long, but keeping no time of its own: a wheel build, a nested suite) is moved to
# the front; every other test keeps its place.


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.get_closest_marker("early") is None)


# -- tests that must run alone ------------------------------------------------------
#
# A test marked `alone` counts what a whole server did (INFO commandstats, etcd's
# revision, MySQL's general log), changes it for everyone (SCRIPT FLUSH, CLIENT
# PAUSE), or measures how a fleet keeps time on this machine. Under xdist, every
# test holds a shared file lock while it runs, and an `alone` module holds it
# exclusively, from its first test to its last, so no other worker's test runs
# beside it. A turnstile taken before either keeps waiting
# exclusive holders from being starved by a stream of shared ones.

_LOCK_DIRECTORY = Path(tempfile.gettempdir())
_held: dict[str, ExitStack] = {}


def _lock_file(kind: str) -> Path:
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID", "serial")
    return _LOCK_DIRECTORY / f"firefly-tests-{run}.{kind}"


@contextmanager
def _flocked(kind: str, mode: int) -> Iterator[None]:
    with _lock_file(kind).open("a") as handle:
        fcntl.flock(handle, mode)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        yield
        return
    if "module" not in _held and item.get_closest_marker("alone") is None:
        with _flocked("turnstile", fcntl.LOCK_EX):
            pass
        with _flocked("run", fcntl.LOCK_SH):
            yield
        return
    if "module" not in _held:
        stack = ExitStack()
        stack.enter_context(_flocked("turnstile", fcntl.LOCK_EX))
        stack.enter_context(_flocked("run", fcntl.LOCK_EX))
        _held["module"] = stack
    try:
        yield
    finally:
        # Held to the module's last test: its module fixtures may keep a server changed.
        if nextitem is None or nextitem.path != item.path:
            _held.pop("module").close()
