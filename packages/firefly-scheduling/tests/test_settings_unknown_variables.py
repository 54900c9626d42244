"""A misspelt `FIREFLY_*` variable is a warning naming it and the nearest known key.

Under `FIREFLY_SCHEDULING_STRICT=true` it is a refusal (exit 2 at boot). The known
keys come from one table in `settings`, which the docs' configuration table must
match; the prefixes the test suites and benchmarks use are never flagged.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from firefly_scheduling import ConfigurationError, Settings
from firefly_scheduling.cli import main
from firefly_scheduling.settings import KNOWN_KEYS, RESERVED_PREFIXES, env_var, unknown_variables

REPOSITORY = Path(__file__).resolve().parents[3]
SUPPORT = str(Path(__file__).resolve().parent / "host_support")


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for variable in [name for name in os.environ if name.startswith("FIREFLY_")]:
        if not variable.startswith("FIREFLY_TEST_"):
            monkeypatch.delenv(variable)
    monkeypatch.setenv("FIREFLY_SCHEDULING_MANIFEST", str(tmp_path / "absent.json"))


@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        ("FIREFLY_SCHEDULING_LOCK_REDIS_ULR", "FIREFLY_SCHEDULING_LOCK_REDIS_URL"),
        ("FIREFLY_SCHEDULING_LOCK_PROVDER", "FIREFLY_SCHEDULING_LOCK_PROVIDER"),
        ("FIREFLY_SCAN_PACKAGE", "FIREFLY_SCAN_PACKAGES"),
        ("FIREFLY_SCHEDULING_LOCK_REQUIERD", "FIREFLY_SCHEDULING_LOCK_REQUIRED"),
        ("FIREFLY_SCHEDULING_LOCK_REDDIS_URL", "FIREFLY_SCHEDULING_LOCK_REDIS_URL"),
    ],
)
def test_a_typo_is_a_warning_naming_the_nearest_known_variable(
    typo: str, meant: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="firefly_scheduling.settings"):
        Settings.from_env({typo: "x"})
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(typo in message and f"did you mean {meant}" in message for message in warnings), (
        warnings
    )


def test_the_value_of_an_unknown_variable_is_never_shown(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="firefly_scheduling.settings"):
        Settings.from_env({"FIREFLY_SCHEDULING_LOCK_REDIS_ULR": "redis://:S3cret@h/0"})
    assert "FIREFLY_SCHEDULING_LOCK_REDIS_ULR" in caplog.text
    assert "S3cret" not in caplog.text


def test_strict_settings_refuse_an_unknown_variable() -> None:
    environment = {"FIREFLY_SCHEDULING_STRICT": "true", "FIREFLY_SCHEDULING_LOCK_PROVDER": "redis"}
    with pytest.raises(ConfigurationError) as raised:
        Settings.from_env(environment)
    message = str(raised.value)
    assert "FIREFLY_SCHEDULING_LOCK_PROVDER" in message
    assert "FIREFLY_SCHEDULING_LOCK_PROVIDER" in message
    assert "FIREFLY_SCHEDULING_STRICT" in message


@pytest.mark.timeout(60)
@pytest.mark.parametrize("command", ["run", "tick", "schedule"])
def test_a_strict_host_exits_2_on_a_typo(command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIREFLY_SCHEDULING_STRICT", "true")
    monkeypatch.setenv("FIREFLY_SCHEDULING_LOCK_PROVDER", "redis")
    arguments = [command, "--path", SUPPORT, "--app", "firefly_host_unit_app"]
    result = CliRunner().invoke(main, arguments)
    assert result.exit_code == 2, result.output
    assert "did you mean FIREFLY_SCHEDULING_LOCK_PROVIDER" in result.output


@pytest.mark.parametrize("command", ["schedule", "cache"])
def test_every_command_names_the_typo(
    command: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # The report: PROVDER=redis ran under `none`, and nothing named the misspelt variable.
    monkeypatch.setenv("FIREFLY_SCHEDULING_LOCK_PROVDER", "redis")
    with caplog.at_level(logging.WARNING, logger="firefly_scheduling.settings"):
        CliRunner().invoke(main, [command, "--path", SUPPORT, "--app", "firefly_host_unit_app"])
    assert "FIREFLY_SCHEDULING_LOCK_PROVDER" in caplog.text
    assert "did you mean FIREFLY_SCHEDULING_LOCK_PROVIDER" in caplog.text


@pytest.mark.parametrize(
    "variable",
    [
        "FIREFLY_TEST_REDIS_URL",
        "FIREFLY_TEST_REQUIRE_SERVERS",
        "FIREFLY_TEST_ACME_URL",
        "FIREFLY_BENCH_DATABASE",
        "FIREFLY_CHAOS_PACE",
        "FIREFLY_STRESS_WITNESS",
        "FIREFLY_HOSTAPP_LOG",
        "FIREFLY_DJANGO_TEST_DIR",
    ],
)
def test_the_test_and_benchmark_prefixes_are_never_flagged(variable: str) -> None:
    assert variable.startswith(RESERVED_PREFIXES)
    assert unknown_variables({variable: "x"}) == ()
    Settings.from_env({variable: "x", "FIREFLY_SCHEDULING_STRICT": "true"})


def test_every_known_key_and_every_provider_url_is_accepted() -> None:
    environment = {env_var(key): "1" for key in KNOWN_KEYS}
    for name in ("postgres", "database", "mysql", "redis", "memcached", "etcd", "memory"):
        environment[f"FIREFLY_SCHEDULING_LOCK_{name.upper()}_URL"] = "x://h"
    assert unknown_variables(environment) == ()


def test_other_programs_variables_are_left_alone() -> None:
    assert unknown_variables({"DATABASE_URL": "x", "REDIS_URL": "y", "FIREFLYX": "z"}) == ()


def test_the_docs_configuration_table_names_exactly_the_known_keys() -> None:
    text = (REPOSITORY / "docs" / "configuration.md").read_text()
    table = [line for line in text.splitlines() if line.startswith("| `firefly.")]
    documented = {line.split("`")[1] for line in table}
    provider_url = re.compile(r"firefly\.scheduling\.lock\.[a-z]+\.url")
    provider_urls = {key for key in documented if provider_url.fullmatch(key)}
    assert documented - provider_urls == set(KNOWN_KEYS)
