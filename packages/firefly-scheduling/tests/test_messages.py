"""Messages and help that told a newcomer something wrong, or too little.

Each case was seen: an install hint that did not fix the error, a cadence the
duration parser refused, a libpq key=value string refused with "set history to off"
alone, an error that hid that its URL came from `DATABASE_URL`, decorator and cron
errors without the task or the field, a provider "unknown" that was only not
installed, `python -m firefly_scheduling` missing, and tables that broke words in two
at 80 columns.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from firefly_scheduling import ConfigurationError, ScheduledDescriptor, Settings, scheduled
from firefly_scheduling.cli import main
from firefly_scheduling.cli.schedule import schedule_row
from firefly_scheduling.locks.providers import resolve_lock
from firefly_scheduling.providers import registry
from firefly_scheduling.schedule.cadence import BUCKETS, Cadence
from firefly_scheduling.schedule.durations import parse_duration

REPOSITORY = Path(__file__).resolve().parents[3]
SUPPORT = str(Path(__file__).resolve().parent / "host_support")


# -- the asyncio database lock's install hint and extra -------------------------------


def _in_a_process_without(modules: list[str], code: str) -> subprocess.CompletedProcess[str]:
    """Run `code` in a fresh interpreter where importing any of `modules` fails."""
    hide = "".join(f"sys.modules[{name!r}] = None\n" for name in modules)
    return subprocess.run(
        [sys.executable, "-c", f"import sys\n{hide}{code}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


RESOLVE_ASYNC_DATABASE_LOCK = """
import asyncio
from firefly_scheduling import Settings
from firefly_scheduling.aio import resolve_async_lock
settings = Settings(lock_provider="database", lock_urls={"database": "sqlite:///%s"})
async def main():
    lock = resolve_async_lock(settings)
    try:
        await lock.try_acquire("x", 5)
    finally:
        await lock.aclose()
try:
    asyncio.run(main())
except Exception as err:
    print(type(err).__name__, err)
"""


@pytest.mark.parametrize("missing", [["greenlet"], ["aiosqlite"]])
def test_the_asyncio_database_lock_names_the_extra_that_fixes_it(
    missing: list[str], tmp_path: Path
) -> None:
    pytest.importorskip("firefly_scheduling_database")
    done = _in_a_process_without(missing, RESOLVE_ASYNC_DATABASE_LOCK % (tmp_path / "l.db"))
    output = done.stdout + done.stderr
    assert output.startswith("ConfigurationError"), output
    assert "pip install 'firefly-scheduling[database-asyncio]'" in output
    assert "firefly-scheduling-database[asyncio]" in output
    assert "aiosqlite" in output


def test_the_core_extra_installs_the_asyncio_database_lock() -> None:
    project = tomllib.loads((REPOSITORY / "packages/firefly-scheduling/pyproject.toml").read_text())
    extra = project["project"]["optional-dependencies"]["database-asyncio"]
    assert any(item.startswith("firefly-scheduling-database[asyncio]") for item in extra)
    assert any(item.startswith("aiosqlite") for item in extra)
    lock = (REPOSITORY / "uv.lock").read_text()
    assert '"database-asyncio"' in lock or "database-asyncio" in lock


# -- what `schedule --host tick` prints, the parser reads ---------------------------


@pytest.mark.parametrize("seconds", BUCKETS)
def test_every_cadence_tick_prints_is_a_duration(seconds: int) -> None:
    text = Cadence(seconds).describe()
    assert parse_duration(text, source="test") == seconds


@pytest.mark.parametrize(
    "text", ["every 0 seconds", "every -5 minutes", "every minutes", "every 5 hours"]
)
def test_a_malformed_cadence_phrase_is_refused(text: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        parse_duration(text, source="test")
    assert repr(text) in str(raised.value)


# -- decorator and cron errors name the task and the field ---------------------------


def _task() -> object:
    namespace: dict[str, object] = {"__name__": "app.tasks"}
    exec("def report():\n    pass\n", namespace)
    return namespace["report"]


@pytest.mark.parametrize(
    "arguments", [{}, {"cron": "* * * * *", "fixed_rate": "1s"}, {"fixed_rate": None}]
)
def test_a_decorator_without_exactly_one_trigger_names_the_task(
    arguments: dict[str, object],
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        scheduled(**arguments)(_task())  # type: ignore[arg-type]
    assert str(raised.value).startswith("app.tasks:report: ")
    assert "exactly one of cron=, fixed_rate=, fixed_delay=" in str(raised.value)


@pytest.mark.parametrize(
    ("cron", "field", "value", "bounds"),
    [
        ("61 * * * *", "minute", "61", "0-59"),
        ("0 25 * * *", "hour", "25", "0-23"),
        ("0 0 32 * *", "day-of-month", "32", "1-31"),
        ("0 0 0 * *", "day-of-month", "0", "1-31"),
        ("0 0 * 13 *", "month", "13", "1-12"),
        ("0 0 * * 8", "day-of-week", "8", "0-7"),
        ("0-70/5 * * * *", "minute", "70", "0-59"),
        ("0 1,2,30 * * *", "hour", "30", "0-23"),
    ],
)
def test_a_cron_field_out_of_range_is_named(cron: str, field: str, value: str, bounds: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        scheduled(cron=cron)(_task())
    message = str(raised.value)
    assert message.startswith("app.tasks:report: ")
    assert f"{field} field" in message
    assert f"{value} is out of range {bounds}" in message


# -- a first-party provider that is not installed -----------------------------------


def test_a_first_party_provider_not_installed_is_called_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    installed = registry.registered_providers()
    without_redis = {name: point for name, point in installed.items() if name != "redis"}
    monkeypatch.setattr(registry, "registered_providers", lambda: without_redis)
    with pytest.raises(ConfigurationError) as raised:
        resolve_lock(Settings(lock_provider="redis"))
    message = str(raised.value)
    assert "'redis' is not installed" in message
    assert "unknown" not in message
    assert "pip install 'firefly-scheduling[redis]'" in message


def test_a_provider_nobody_ships_is_still_unknown() -> None:
    with pytest.raises(ConfigurationError, match="unknown lock provider 'zookeeper'"):
        resolve_lock(Settings(lock_provider="zookeeper"))


# -- a URL from DATABASE_URL says so --------------------------------------------------


def test_an_error_about_a_url_from_database_url_says_so() -> None:
    pytest.importorskip("firefly_scheduling_mysql")
    settings = Settings.from_env(
        {"FIREFLY_SCHEDULING_LOCK_PROVIDER": "mysql", "DATABASE_URL": "sqlite:///app.db"}
    )
    with pytest.raises(ConfigurationError) as raised:
        resolve_lock(settings)
    assert "'sqlite'" in str(raised.value)
    assert "the URL came from DATABASE_URL" in str(raised.value)


def test_an_error_about_a_url_of_its_own_key_names_the_key() -> None:
    pytest.importorskip("firefly_scheduling_mysql")
    settings = Settings.from_env(
        {"FIREFLY_SCHEDULING_LOCK_PROVIDER": "mysql", "FIREFLY_SCHEDULING_LOCK_MYSQL_URL": "x://h"}
    )
    with pytest.raises(ConfigurationError) as raised:
        resolve_lock(settings)
    assert "the URL came from FIREFLY_SCHEDULING_LOCK_MYSQL_URL" in str(raised.value)


# -- a libpq key=value string as the history's URL ------------------------------------


@pytest.mark.parametrize("source", ["FIREFLY_SCHEDULING_LOCK_POSTGRES_URL", "DATABASE_URL"])
def test_a_key_value_string_for_the_stores_offers_the_url_form(
    source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("firefly_scheduling_postgres")
    for variable in [name for name in os.environ if name.startswith("FIREFLY_SCHEDULING_")]:
        monkeypatch.delenv(variable)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("FIREFLY_SCHEDULING_MANIFEST", str(tmp_path / "absent.json"))
    monkeypatch.setenv("FIREFLY_SCHEDULING_LOCK_PROVIDER", "postgres")
    monkeypatch.setenv(source, "host=127.0.0.1 port=1 dbname=app user=app password=S3cret")
    result = CliRunner().invoke(main, ["tick", "--path", SUPPORT, "--app", "firefly_host_unit_app"])
    assert result.exit_code == 2, result.output
    assert "postgresql://" in result.output
    assert "FIREFLY_SCHEDULING_HISTORY_URL=off" in result.output
    assert f"came from {source}" in result.output
    assert "S3cret" not in result.output


# -- `python -m firefly_scheduling` ---------------------------------------------------


def test_python_dash_m_runs_the_command_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "firefly_scheduling", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Usage:" in done.stdout
    assert "schedule" in done.stdout


# -- tables at 80 columns -------------------------------------------------------------


@pytest.mark.parametrize("host", ["run", "tick"])
def test_tables_keep_every_word_whole_at_80_columns(host: str) -> None:
    sys.path.insert(0, SUPPORT)
    try:
        result = CliRunner(env={"COLUMNS": "80"}).invoke(
            main,
            ["schedule", "--app", "firefly_scheduling.demo_app", "--host", host],
        )
    finally:
        sys.path.remove(SUPPORT)
    assert result.exit_code == 0, result.output
    from firefly_scheduling import scan  # noqa: PLC0415

    now = datetime.now(UTC)
    descriptors: list[ScheduledDescriptor] = scan(["firefly_scheduling.demo_app"])
    rows = [schedule_row(descriptor, now, host) for descriptor in descriptors]
    shown = [
        (row.trigger if host == "run" else row.under_tick, row.zone, row.lock, row.next_fire)
        for row in rows
    ]
    words = {
        word
        for cells in shown
        for cell in cells
        for word in cell.split()
        if not re.fullmatch(r"[0-9:]+", word)  # a time of day may have moved on meanwhile
    }
    broken = sorted(word for word in words if word not in result.output)
    assert broken == [], result.output
