"""How `current_fire().atomic` decides that the task's connection reaches the history's
database (`sql_history.same_database`): on the client, by kind, host as spelt, port and
database name, or a SQLite file's real path; never guessed equal."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from firefly_scheduling import ConfigurationError
from firefly_scheduling_database.sql_history.same_database import of_url, refuse_unless_same


def same(history: str, caller: str) -> bool:
    try:
        refuse_unless_same(of_url(make_url(history)), of_url(make_url(caller)))
    except ConfigurationError:
        return False
    return True


def test_the_driver_and_the_default_port_do_not_matter() -> None:
    assert same("postgresql://u@db.internal/app", "postgresql+psycopg://u@db.internal:5432/app")
    assert same("mysql://root@DB:3306/app", "mariadb+pymysql://other@db/app")


@pytest.mark.parametrize(
    "caller",
    [
        "postgresql+psycopg://u@db.internal:5433/app",  # another port
        "postgresql+psycopg://u@db.internal/other",  # another database
        "postgresql+psycopg://u@10.0.0.5/app",  # the host spelt otherwise
        "mysql+pymysql://u@db.internal:5432/app",  # another server kind
    ],
)
def test_anything_else_is_another_database(caller: str) -> None:
    assert not same("postgresql://u@db.internal/app", caller)


def test_a_sqlite_file_is_compared_by_its_real_path(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    direct = f"sqlite:///{tmp_path / 'app.db'}"
    roundabout = f"sqlite+aiosqlite:///{tmp_path / 'sub' / '..' / 'app.db'}"
    assert same(direct, roundabout)
    assert not same(direct, f"sqlite:///{tmp_path / 'other.db'}")


def test_a_memory_sqlite_history_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="memory SQLite"):
        refuse_unless_same(of_url(make_url("sqlite://")), of_url(make_url("sqlite://")))


def test_the_refusal_names_both_without_the_password() -> None:
    with pytest.raises(ConfigurationError) as refused:
        refuse_unless_same(
            of_url(make_url("postgresql://app:hunter2@db/app")),
            of_url(make_url("postgresql://app:hunter2@db/reports")),
        )
    text = str(refused.value)
    assert "hunter2" not in text
    assert "/app" in text
    assert "/reports" in text
