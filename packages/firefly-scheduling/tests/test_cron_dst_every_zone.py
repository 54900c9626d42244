"""Every transition of every IANA zone, 1970-2037: no duplicate and no missing fire, per policy.

`host_support/firefly_dst_walk.py` finds each zone's UTC-offset changes, evaluates
the schedule under every policy that applies in a window around each change, and
compares the fires with an oracle that reads offsets from the changes alone. The
full walk runs in two processes whose `TZ` differ; both must find nothing wrong and
compute the same instants (their digests are equal), since nodes of a fleet run in
any local zone.

`FIREFLY_DST_EXHAUSTIVE=1` also walks every zone on its own (no window computed
once for several zones) for all of `EXPRESSIONS`; that takes tens of minutes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zoneinfo
from datetime import UTC, datetime
from pathlib import Path

import pytest

SUPPORT = Path(__file__).resolve().parent / "host_support"
sys.path.insert(0, str(SUPPORT))

from firefly_dst_walk import (  # noqa: E402 - found through the path set above
    actual_fires,
    expected_fires,
    offset_history,
    slots_in,
    walk,
    windows,
)

from firefly_scheduling.schedule.cron import CronSchedule  # noqa: E402 - as above

EXPRESSIONS = ["30 2 * * *", "0 * * * *", "*/15 * * * *", "0 0 * * *", "30 1 * * 0"]
#: A 30-minute shift, a 45-minute offset, changes at midnight, a 2-hour shift, a
#: skipped day, and the zone most tasks run in.
ODD_ZONES = [
    "Australia/Lord_Howe",
    "Pacific/Chatham",
    "Africa/Cairo",
    "Antarctica/Troll",
    "Pacific/Apia",
    "Europe/Paris",
]
#: Local zones of the two walking processes: both unlike the zones above, and unlike UTC.
NODE_ZONES = ["Asia/Kathmandu", "America/St_Johns"]
EXHAUSTIVE = os.environ.get("FIREFLY_DST_EXHAUSTIVE") == "1"


def run_walk(local_zone: str, *arguments: str) -> subprocess.Popen[str]:
    environment = {**os.environ, "TZ": local_zone}
    command = [sys.executable, str(SUPPORT / "firefly_dst_walk.py"), *arguments]
    return subprocess.Popen(command, env=environment, stdout=subprocess.PIPE, text=True)


def reports(*arguments: str) -> list[dict[str, object]]:
    """The walk's report from each of the `NODE_ZONES` processes, run side by side."""
    processes = [run_walk(zone, *arguments) for zone in NODE_ZONES]
    outputs = [process.communicate()[0] for process in processes]
    assert [process.returncode for process in processes] == [0, 0]
    return [json.loads(output) for output in outputs]


def test_every_transition_of_every_zone_daily_cron_on_two_nodes() -> None:
    first, second = reports("--cron", "30 2 * * *")
    assert first["examples"] == []
    assert (first["duplicates"], first["missing"]) == (0, 0)
    assert first["zones"] == len(zoneinfo.available_timezones())
    assert int(str(first["transitions"])) > 10_000
    slots = first["slots"]
    assert isinstance(slots, dict)
    assert slots["gap"] > 0
    assert slots["fold"] > 0
    assert first == second  # the same instants, whatever the node's local zone


def test_odd_zones_every_expression_and_policy() -> None:
    expressions = [e for e in EXPRESSIONS if e != "*/15 * * * *"]
    report = walk(ODD_ZONES, expressions, group=False).report()
    assert report["examples"] == []
    assert (report["duplicates"], report["missing"]) == (0, 0)
    assert report["zones"] == len(ODD_ZONES)


def test_odd_zones_quarter_hourly_since_2020() -> None:
    report = walk(ODD_ZONES, ["*/15 * * * *"], group=False, since=datetime(2020, 1, 1, tzinfo=UTC))
    assert report.report()["examples"] == []
    assert (report.duplicates, report.missing) == (0, 0)
    assert report.slots["gap"] > 0
    assert report.slots["fold"] > 0


def test_the_oracle_tells_one_pass_from_the_other() -> None:
    """The check can fail: a `last` schedule is not what `first` expects, and vice versa."""
    history = offset_history(zoneinfo.ZoneInfo("Europe/Paris"))
    change = int(datetime(2026, 10, 25, 1, tzinfo=UTC).timestamp())
    (window,) = [w for w in windows(history) if w[0] <= change <= w[1]]
    last = CronSchedule.parse("30 2 * * *", "Europe/Paris", source="t", dst_fold="last")
    slots = slots_in(last.fields, history, window)
    assert actual_fires(last, window[0], window[1]) == expected_fires(slots, "shift", "last")
    assert expected_fires(slots, "shift", "first") != expected_fires(slots, "shift", "last")


@pytest.mark.skipif(not EXHAUSTIVE, reason="set FIREFLY_DST_EXHAUSTIVE=1 (tens of minutes)")
def test_exhaustive_every_zone_on_its_own_every_expression() -> None:
    arguments = [argument for e in EXPRESSIONS for argument in ("--cron", e)]
    first, second = reports("--each-zone", *arguments)
    assert (first["duplicates"], first["missing"]) == (0, 0)
    assert first == second
