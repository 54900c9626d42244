"""The CLI's `schedule` on a task's fire policies: daylight-saving rules, jitter and timeout,
`--next` and `--json`, and the boot refusing a bad policy value with exit 2."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from firefly_scheduling.cli import main
from firefly_scheduling.schedule.jitter import jitter_offset

pytestmark = pytest.mark.usefixtures("isolated")


def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, list(args), env={"COLUMNS": "200", **(env or {})})


DST_APP = """\
from firefly_scheduling import scheduled

@scheduled(cron="30 2 * * *", zone="Europe/Paris", dst_fold="both")
def nightly():
    pass

@scheduled(cron="30 2 * * *", zone="Europe/Paris", dst_gap="skip")
def skipped():
    pass
"""


def write_dst_app(isolated: Path) -> None:
    (isolated / "dstapp").mkdir()
    (isolated / "dstapp" / "__init__.py").write_text(DST_APP)


def next_fires(*args: str) -> list[dict[str, object]]:
    result = invoke("schedule", "--path", ".", "--app", "dstapp", "--json", *args)
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.output.splitlines()]


def test_schedule_next_lists_a_fold_twice_and_marks_each_pass(isolated: Path) -> None:
    write_dst_app(isolated)
    rows = next_fires("--next", "3", "--from", "2026-10-24T12:00Z")
    nightly = [(row["instant"], row["dst"]) for row in rows if row["target"] == "dstapp:nightly"]
    assert nightly == [
        ("2026-10-25T00:30:00+00:00", "first"),
        ("2026-10-25T01:30:00+00:00", "last"),
        ("2026-10-26T01:30:00+00:00", None),
    ]
    assert rows[0] == {
        "target": "dstapp:nightly",
        "instant": "2026-10-25T00:30:00+00:00",
        "local": "2026-10-25T02:30:00+02:00",
        "zone": "Europe/Paris",
        "dst_gap": "shift",
        "dst_fold": "both",
        "dst": "first",
        "jitter_offset_seconds": 0,
    }


def test_schedule_json_gives_each_cron_task_its_effective_policies(isolated: Path) -> None:
    write_dst_app(isolated)
    result = invoke("schedule", "--path", ".", "--app", "dstapp", "--json")
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.output.splitlines()]
    assert [(row["dst_gap"], row["dst_fold"]) for row in rows] == [
        ("shift", "both"),
        ("skip", "first"),
    ]


def test_schedule_next_marks_a_shifted_fire_and_leaves_out_a_skipped_day(isolated: Path) -> None:
    write_dst_app(isolated)
    rows = next_fires("--next", "1", "--from", "2026-03-29T00:00+01:00")
    assert [(row["target"], row["instant"], row["dst"]) for row in rows] == [
        ("dstapp:nightly", "2026-03-29T01:00:00+00:00", "shifted"),
        ("dstapp:skipped", "2026-03-30T00:30:00+00:00", None),
    ]


def test_schedule_next_table_shows_policies_and_marks(isolated: Path) -> None:
    write_dst_app(isolated)
    result = invoke(
        "schedule", "--path", ".", "--app", "dstapp", "--next", "2", "--from", "2026-10-24T12:00Z"
    )
    assert result.exit_code == 0, result.output
    for text in (
        "dst_gap=shift dst_fold=both",
        "dst_gap=skip dst_fold=first",
        "2026-10-25 00:30:00 UTC (2026-10-25 02:30 CEST) first pass of a repeated time",
        "2026-10-25 01:30:00 UTC (2026-10-25 02:30 CET) second pass of a repeated time",
    ):
        assert text in result.output


@pytest.mark.parametrize("start", ["2026-03-29", "2026-03-29T00:00", "tomorrow"])
def test_schedule_from_needs_an_instant_with_an_offset(isolated: Path, start: str) -> None:
    write_dst_app(isolated)
    result = invoke("schedule", "--path", ".", "--app", "dstapp", "--next", "1", "--from", start)
    assert result.exit_code == 2
    assert f"{start!r} is not an ISO-8601 instant with an offset" in result.output


@pytest.mark.parametrize(
    ("package", "arguments", "message"),
    [
        ("badgap", 'cron="30 2 * * *", dst_gap="later"', "badgap:bad: dst_gap='later' is not one"),
        ("badfold", 'cron="30 2 * * *", dst_fold="all"', "badfold:bad: dst_fold='all' is not one"),
        (
            "badrate",
            'fixed_rate="1h", dst_fold="both"',
            "badrate:bad: dst_fold='both' only applies",
        ),
        (
            "badjitter",
            'fixed_rate="1m", jitter="0s"',
            "badjitter:bad jitter: a duration must be greater than zero, got '0s'",
        ),
        (
            "longjitter",
            'fixed_rate="1m", jitter="90s"',
            "longjitter:bad: jitter=1m30s is not shorter than its fixed_rate of 1m",
        ),
        (
            "badtimeout",
            'fixed_rate="1m", timeout="0s"',
            "badtimeout:bad timeout: a duration must be greater than zero, got '0s'",
        ),
        (
            "longtimeout",
            'fixed_rate="1m", timeout="400d"',
            "longtimeout:bad timeout:",
        ),
        (
            "cronjitter",
            'cron="*/10 * * * *", jitter="10m"',
            "cronjitter:bad: jitter=10m is not shorter than the shortest gap",
        ),
    ],
)
def test_a_bad_dst_policy_jitter_or_timeout_stops_the_boot_with_exit_2(
    isolated: Path, package: str, arguments: str, message: str
) -> None:
    (isolated / package).mkdir()
    source = f"@scheduled({arguments})\ndef bad():\n    pass\n"
    (isolated / package / "__init__.py").write_text(
        f"from firefly_scheduling import scheduled\n\n{source}"
    )
    result = invoke("schedule", "--path", ".", "--app", package)
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())


def test_schedule_next_json_shows_each_fire_s_jitter_offset(isolated: Path) -> None:
    (isolated / "jitterapp").mkdir()
    (isolated / "jitterapp" / "__init__.py").write_text(
        "from firefly_scheduling import scheduled\n\n"
        '@scheduled(cron="0 * * * *", jitter="30m")\ndef hourly():\n    pass\n\n'
        '@scheduled(cron="0 * * * *")\ndef plain():\n    pass\n'
    )
    result = invoke(
        "schedule",
        "--path",
        ".",
        "--app",
        "jitterapp",
        "--json",
        "--next",
        "3",
        "--from",
        "2026-06-03T12:00Z",
    )
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.output.splitlines()]
    hourly = [row for row in rows if row["target"] == "jitterapp:hourly"]
    assert [row["instant"] for row in hourly] == [
        "2026-06-03T13:00:00+00:00",
        "2026-06-03T14:00:00+00:00",
        "2026-06-03T15:00:00+00:00",
    ]
    assert [row["jitter_offset_seconds"] for row in hourly] == [
        jitter_offset(
            "jitterapp:hourly", datetime.fromisoformat(str(row["instant"])), 1800.0
        ).total_seconds()
        for row in hourly
    ]
    assert all(0 < float(row["jitter_offset_seconds"]) < 1800 for row in hourly)
    assert {row["jitter_offset_seconds"] for row in rows if row["target"] == "jitterapp:plain"} == {
        0.0
    }
    listed = invoke("schedule", "--path", ".", "--app", "jitterapp", "--json")
    assert [json.loads(line)["jitter"] for line in listed.output.splitlines()] == [1800.0, None]


def test_schedule_json_lists_each_task_s_timeout(isolated: Path) -> None:
    (isolated / "timeoutapp").mkdir()
    (isolated / "timeoutapp" / "__init__.py").write_text(
        "from firefly_scheduling import scheduled\n\n"
        '@scheduled(fixed_rate="1m", timeout="90s")\ndef bounded():\n    pass\n\n'
        '@scheduled(fixed_rate="1m")\ndef plain():\n    pass\n'
    )
    listed = invoke("schedule", "--path", ".", "--app", "timeoutapp", "--json")
    assert listed.exit_code == 0, listed.output
    rows = {row["target"]: row for row in map(json.loads, listed.output.splitlines())}
    assert {target: row["timeout"] for target, row in rows.items()} == {
        "timeoutapp:bounded": 90.0,
        "timeoutapp:plain": None,
    }
