"""Django's `fenced_update` and `AddFenceColumn`, on SQLite and PostgreSQL, run as Django runs.

A child process migrates a small project (its second migration adds the fence column
with `AddFenceColumn`), checks that `makemigrations` finds the model and the
migrations in agreement, then drives the guarded UPDATE. The test reads the schema
and the rows back through its own connection.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parent))
from python_runs import run_python

pytest.importorskip("django")

PROJECT = Path(__file__).resolve().parent / "django_fencing"
Query = Callable[[str], list[tuple[Any, ...]]]


@pytest.fixture(params=["sqlite", "postgres"])
def project(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[dict[str, str], Query]]:
    """The child's environment, and a query on its database through the test's own connection."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("FIREFLY_FENCING")}
    env.update(DJANGO_SETTINGS_MODULE="fencing_site.settings", PYTHONPATH=str(PROJECT))
    if request.param == "sqlite":
        path = tmp_path / "django.db"
        env["FIREFLY_FENCING_SQLITE"] = str(path)

        def query(statement: str) -> list[tuple[Any, ...]]:
            with sqlite3.connect(path) as connection:
                return connection.execute(statement).fetchall()

        yield env, query
        return
    url = request.getfixturevalue("postgres_url")
    parts = urlsplit(url)
    schema = f"fencing_django_{uuid.uuid4().hex[:10]}"
    env.update(
        FIREFLY_FENCING_PG_SCHEMA=schema,
        FIREFLY_FENCING_PG_HOST=parts.hostname or "127.0.0.1",
        FIREFLY_FENCING_PG_PORT=str(parts.port or 5432),
        FIREFLY_FENCING_PG_DATABASE=parts.path.lstrip("/"),
        FIREFLY_FENCING_PG_USER=parts.username or "postgres",
    )
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    try:

        def query(statement: str) -> list[tuple[Any, ...]]:
            with psycopg.connect(url, autocommit=True) as connection:
                connection.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
                return connection.execute(statement).fetchall()

        yield env, query
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def test_the_migration_adds_the_column_and_only_newer_or_equal_tokens_write(
    project: tuple[dict[str, str], Query],
) -> None:
    env, query = project
    done = run_python(["check_fencing.py"], env=env, cwd=PROJECT)
    assert done.returncode == 0, done.stderr + done.stdout
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["model_matches_migrations"] is True
    assert [report[k] for k in ("null_then_5", "equal_5", "newer_7", "older_6")] == [1, 1, 1, 0]
    assert report["async_8_then_7"] == [1, 0]
    # Read back through the test's own connection: the refused writes left the row.
    assert query("SELECT id, owner, balance, fence_token FROM ledger_account ORDER BY id") == [
        (1, "eight", 8, 8),
        (2, "other", 0, None),
    ]
    refused = report["refused"]
    assert "the fencing token is None (called outside a fire" in refused["none"]
    assert "must be an int, got True (bool)" in refused["bool"]
    assert "between 0 and" in refused["negative"]
    assert "model ledger.Account has no fence field 'missing'" in refused["missing_column"]
    assert "ledger.Account.owner is a CharField, not an integer field" in refused["text_column"]
    assert "plain identifier" in refused["bad_name"]
    assert "'fence_token' is the fence column" in refused["token_as_value"]
    assert refused["operation_column"].startswith("AddFenceColumn: ")
    assert report["deconstructed"] == [
        ["AddFenceColumn", ["account"], {"column": "guard_token"}],
        ["AddFenceColumn", ["account"], {}],
    ]


def test_the_fence_column_is_a_nullable_bigint(project: tuple[dict[str, str], Query]) -> None:
    env, query = project
    migrate = run_python(["-m", "django", "migrate", "--verbosity", "0"], env=env, cwd=PROJECT)
    assert migrate.returncode == 0, migrate.stderr
    if "FIREFLY_FENCING_SQLITE" in env:
        columns = {row[1]: (row[2], row[3]) for row in query("PRAGMA table_info(ledger_account)")}
        assert columns["fence_token"] == ("bigint", 0)  # type, NOT NULL flag
    else:
        (column,) = query(
            "SELECT data_type, is_nullable FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name = 'ledger_account'"
            " AND column_name = 'fence_token'"
        )
        assert column == ("bigint", "YES")
