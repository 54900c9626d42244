"""`with current_fire().atomic(using="default"):` in a real Django process.

The block is Django's `transaction.atomic`: the body writes its application row with
Django's cursor inside it, on SQLite (a file), PostgreSQL and MariaDB (Django's MySQL
backend through PyMySQL, as the test environment has no mysqlclient), with the SQL history
in that same database. Each case runs in a process of its own
(`atomic_django_node.py`, Django configured there), and a second connection reads
both tables afterwards: committed, the row and the `succeeded` record; raised,
neither (the record `failed`); stale, `StaleFireError`, no row, the adopter's record.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parent))
from atomic_clients import Place, database_url, place_on
from python_runs import orders_env, run_python

NODE_SCRIPT = Path(__file__).resolve().parent / "atomic_django_node.py"


@pytest.fixture(params=["sqlite", "postgres", "mariadb"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Place]:
    with place_on(database_url(request.param, request, tmp_path), tmp_path) as fresh:
        yield fresh


def django_database(url: str) -> dict[str, Any]:
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": parsed.database}
    return {
        "ENGINE": f"django.db.backends.{backend}",
        "NAME": parsed.database,
        "USER": parsed.username or "",
        "PASSWORD": parsed.password or "",
        "HOST": parsed.host or "",
        "PORT": str(parsed.port or {"postgresql": 5432, "mysql": 3306}[backend]),
    }


def run_node(place: Place, mode: str) -> tuple[str, datetime, dict[str, Any]]:
    target = place.descriptor().target
    instant = datetime.now(UTC).replace(microsecond=0)
    orders = {
        "django": django_database(place.url),
        "url": place.url,
        "history_table": place.history.table.name,
        "lock_url": place.lock_url,
        "lock_table": place.lock_table,
        "app_table": place.app.name,
        "target": target,
        "instant": instant.isoformat(),
        "mode": mode,
    }
    done = run_python([str(NODE_SCRIPT)], env=orders_env("FIREFLY_ATOMIC_DJANGO", orders))
    assert done.returncode == 0, done.stderr + done.stdout
    return target, instant, json.loads(done.stdout.strip().splitlines()[-1])


def test_a_committed_django_block_leaves_the_row_and_the_success(place: Place) -> None:
    target, instant, said = run_node(place, "commit")
    assert said == {"verdict": "succeeded", "raised": []}
    assert place.app_rows() == [{"fire": f"{target}@{instant.isoformat()}", "attempt": 1}]
    record = place.record(target, instant)
    assert (record["state"], record["attempt"], record["node"]) == ("succeeded", 1, "A")


def test_a_django_block_that_raises_leaves_neither(place: Place) -> None:
    target, instant, said = run_node(place, "raise")
    assert said == {"verdict": "failed", "raised": ["ValueError"]}
    assert place.app_rows() == []
    assert place.record(target, instant)["state"] == "failed"


def test_a_stale_django_block_gets_an_error_and_no_row(place: Place) -> None:
    target, instant, said = run_node(place, "stale")
    assert said == {"verdict": "failed", "raised": ["StaleFireError"]}
    assert place.app_rows() == []
    record = place.record(target, instant)
    assert (record["state"], record["attempt"], record["node"]) == ("running", 2, "B")
