"""`firefly-scheduling migrate` (the click command `firefly_scheduling_database.cli:migrate`)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from sqlalchemy import inspect

from firefly_scheduling.cli import main
from firefly_scheduling_database import DatabaseLeaseLock
from firefly_scheduling_database.cli import migrate
from firefly_scheduling_database.engine import lock_engine

SECRET = "s3cr3t-pw"
#: Every table the database package uses besides the lease pair.
STORE_TABLES = {
    "firefly_scheduling_anchors",
    "firefly_scheduling_control",
    "firefly_scheduling_runs",
}
LEASE_TABLES = {
    "firefly_scheduling_locks",
    "firefly_scheduling_locks_fences",
    "firefly_scheduling_locks_queue",
}


def _tables(url: str) -> set[str]:
    engine = lock_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_migrate_creates_every_table_and_can_run_again(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'locks.sqlite'}"
    runner = CliRunner()
    first = runner.invoke(migrate, ["--url", url])
    assert first.exit_code == 0, first.output
    assert (
        "tables firefly_scheduling_locks, firefly_scheduling_locks_fences, "
        "firefly_scheduling_locks_queue, firefly_scheduling_anchors, "
        "firefly_scheduling_control and firefly_scheduling_runs are ready" in first.output
    )
    assert _tables(url) == LEASE_TABLES | STORE_TABLES
    again = runner.invoke(migrate, ["--url", url])
    assert again.exit_code == 0, again.output
    assert _tables(url) == LEASE_TABLES | STORE_TABLES
    lock = DatabaseLeaseLock(url)
    assert lock.try_acquire("job", 30)
    lock.release("job")
    lock.close()


def test_migrate_reads_the_url_from_the_environment(tmp_path: Path) -> None:
    specific = f"sqlite:///{tmp_path / 'specific.sqlite'}"
    fallback = f"sqlite:///{tmp_path / 'fallback.sqlite'}"
    runner = CliRunner()
    result = runner.invoke(
        migrate,
        ["--table", "app_locks"],
        env={"FIREFLY_SCHEDULING_LOCK_DATABASE_URL": specific, "DATABASE_URL": fallback},
    )
    assert result.exit_code == 0, result.output
    assert _tables(specific) == {"app_locks", "app_locks_fences", "app_locks_queue"} | STORE_TABLES
    result = runner.invoke(migrate, [], env={"DATABASE_URL": fallback})
    assert result.exit_code == 0, result.output
    assert _tables(fallback) == LEASE_TABLES | STORE_TABLES


def test_migrate_without_a_url_is_a_configuration_error_exiting_2() -> None:
    for command, arguments in ((migrate, []), (main, ["migrate"])):
        result = CliRunner().invoke(
            command,
            arguments,
            env={"FIREFLY_SCHEDULING_LOCK_DATABASE_URL": None, "DATABASE_URL": None},
        )
        assert result.exit_code == 2, result.output
        assert "FIREFLY_SCHEDULING_LOCK_DATABASE_URL" in result.output
        assert "Traceback" not in result.output


def test_migrate_failure_is_a_clean_message_without_the_password() -> None:
    result = CliRunner().invoke(migrate, ["--url", f"postgresql://app:{SECRET}@127.0.0.1:1/app"])
    assert result.exit_code == 1
    assert "could not create table 'firefly_scheduling_locks'" in result.output
    assert SECRET not in result.output
    assert "Traceback" not in result.output


def test_migrate_under_the_postgres_provider_blames_that_provider_for_a_missing_url() -> None:
    result = CliRunner().invoke(
        main,
        ["migrate"],
        env={
            "FIREFLY_SCHEDULING_LOCK_PROVIDER": "postgres",
            "FIREFLY_SCHEDULING_LOCK_POSTGRES_URL": None,
            "FIREFLY_SCHEDULING_LOCK_DATABASE_URL": None,
            "DATABASE_URL": None,
        },
    )
    assert result.exit_code == 2, result.output
    assert "the 'postgres' lock provider needs a URL" in result.output
    assert "FIREFLY_SCHEDULING_LOCK_POSTGRES_URL" in result.output
    assert "'database'" not in result.output
