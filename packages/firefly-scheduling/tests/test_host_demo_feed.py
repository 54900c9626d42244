"""The demo's live feed, summary and race clock, from fire-log records (no node processes here)."""

from __future__ import annotations

import io

from rich.console import Console

from firefly_scheduling.cli.demo import RaceClock
from firefly_scheduling.cli.demo_report import FireFeed, TaskTally, print_summary, verdict_of
from firefly_scheduling.hosts.observation.fire_log import FireRecord

HEARTBEAT = "firefly_scheduling.demo_app.tasks:heartbeat"
TIDY = "firefly_scheduling.demo_app.tasks:tidy_up"


def record(
    node: str,
    status: str,
    *,
    target: str = HEARTBEAT,
    second: int = 1,
    locked: bool = True,
    adoption: bool = False,
) -> FireRecord:
    ran = status in {"succeeded", "failed"}
    return FireRecord(
        target=target,
        instant=f"2026-06-03T12:00:{second:02d}.000000+00:00",
        node=node,
        ran=ran,
        locked=locked,
        started_at=None,
        ended_at=None,
        status=status,
        adoption=adoption,
    )


def console() -> tuple[Console, io.StringIO]:
    sink = io.StringIO()
    return Console(file=sink, width=160, color_system=None), sink


def test_a_verdict_reads_in_words_even_one_this_version_does_not_know() -> None:
    assert verdict_of(record("n1", "claimed_elsewhere")) == "claimed elsewhere"
    assert verdict_of(record("n1", "too_late")) == "too late"
    assert verdict_of(record("n1", "some_later_verdict")) == "some later verdict"


def test_a_fire_is_printed_once_every_node_reported_with_each_nodes_verdict() -> None:
    out, sink = console()
    feed = FireFeed(out, nodes=3)
    feed.add([record("node-2", "claimed_elsewhere"), record("node-1", "succeeded")])
    feed.flush()
    assert sink.getvalue() == ""  # node-3 has not reported yet
    feed.add([record("node-3", "overlapping")])
    feed.flush()
    assert sink.getvalue().splitlines() == [
        "12:00:01.000  heartbeat                node-1 succeeded · node-2 claimed elsewhere"
        " · node-3 overlapping"
    ]


def test_the_feed_keeps_instant_order_and_flushes_everything_at_the_end() -> None:
    out, sink = console()
    feed = FireFeed(out, nodes=2)
    feed.add([record("node-1", "succeeded", target=TIDY, locked=False, second=1)])
    feed.add([record("node-1", "succeeded", second=2), record("node-2", "too_late", second=2)])
    feed.add([record("node-2", "held_back", second=3)])
    feed.flush()
    lines = sink.getvalue().splitlines()
    assert [line[:12] for line in lines] == ["12:00:01.000", "12:00:02.000"]
    assert "(unlocked: every node runs it)" in lines[0]
    assert lines[1].endswith("node-1 succeeded · node-2 too late")
    feed.flush(everything=True)
    assert sink.getvalue().splitlines()[-1].endswith("node-2 held back")


def test_the_summary_counts_runs_duplicates_and_why_the_others_did_not_run() -> None:
    heartbeat, tidy = TaskTally(), TaskTally()
    for item in (
        record("node-1", "succeeded", second=1),
        record("node-2", "claimed_elsewhere", second=1),
        record("node-2", "succeeded", second=2),
        record("node-1", "succeeded", second=2, adoption=True),
        record("node-1", "overlapping", second=3),
    ):
        heartbeat.add(item)
    tidy.add(record("node-1", "succeeded", target=TIDY, locked=False))
    tidy.add(record("node-2", "succeeded", target=TIDY, locked=False))
    assert len(heartbeat.fires) == 3
    assert heartbeat.duplicates == 1  # fire :02 ran twice
    assert heartbeat.not_run == {"claimed elsewhere": 1, "overlapping": 1}
    out, sink = console()
    print_summary(out, {HEARTBEAT: heartbeat, TIDY: tidy})
    rows = [line for line in sink.getvalue().splitlines() if "demo_app.tasks" in line]
    assert "claimed elsewhere: 1, overlapping: 1" in rows[0]
    assert [cell.strip() for cell in rows[0].split("│")[2:6]] == ["yes", "3", "3", "1"]
    assert [cell.strip() for cell in rows[1].split("│")[2:6]] == ["no", "1", "2", "-"]


def test_the_summary_never_truncates_or_splits_a_target_on_a_narrow_console() -> None:
    tally = TaskTally()
    for node in ("node-1", "node-2", "node-3"):
        tally.add(record(node, "succeeded", second=int(node[-1])))
        tally.add(record(node, "claimed_elsewhere", second=int(node[-1]) + 3))
    sink = io.StringIO()
    print_summary(Console(file=sink, width=90, color_system=None), {HEARTBEAT: tally})
    assert HEARTBEAT in sink.getvalue(), sink.getvalue()


def test_the_summary_names_targets_relative_to_the_app_it_states() -> None:
    tally = TaskTally()
    tally.add(record("node-1", "succeeded"))
    sink = io.StringIO()
    print_summary(
        Console(file=sink, width=80, color_system=None),
        {HEARTBEAT: tally},
        app="firefly_scheduling.demo_app",
    )
    lines = sink.getvalue().splitlines()
    assert lines[0].strip() == "per task of firefly_scheduling.demo_app"
    assert any(line.startswith("│ tasks:heartbeat │ yes ") for line in lines), lines


def test_a_complete_fire_does_not_push_out_a_waiting_one_of_the_same_instant() -> None:
    """warm_cache and heartbeat share every tenth second; one must not split the other."""
    out, sink = console()
    feed = FireFeed(out, nodes=3)
    warm_cache = "firefly_scheduling.demo_app.tasks:warm_cache"
    feed.add([record(node, "held_back", target=warm_cache) for node in ("node-1", "node-2")])
    feed.add([record("node-1", "claimed_elsewhere"), record("node-3", "claimed_elsewhere")])
    feed.add([record("node-3", "held_back", target=warm_cache)])
    feed.flush()
    assert [line.split()[1] for line in sink.getvalue().splitlines()] == ["warm_cache"]
    feed.add([record("node-2", "succeeded")])
    feed.flush()
    heartbeat = sink.getvalue().splitlines()[1]
    assert heartbeat.endswith("node-2 succeeded · node-1, node-3 claimed elsewhere"), heartbeat


def test_the_race_clock_starts_at_the_first_report_or_after_the_boot_allowance() -> None:
    now = [100.0]
    clock = RaceClock(5.0, boot_allowance=30.0, clock=lambda: now[0])
    now[0] = 120.0  # still booting: nothing reported, the allowance not spent
    assert not clock.over(reported=False)
    assert not clock.over(reported=True)  # the first report: 5 s from here
    now[0] = 124.9
    assert not clock.over(reported=True)
    now[0] = 125.0
    assert clock.over(reported=True)

    silent = RaceClock(5.0, boot_allowance=30.0, clock=lambda: now[0])  # at 125.0
    now[0] = 154.9
    assert not silent.over(reported=False)
    now[0] = 155.0  # the allowance is spent: the race starts without a report
    assert not silent.over(reported=False)
    now[0] = 160.0
    assert silent.over(reported=False)
