"""Catch-up of 10,000 fires one task missed while its fleet was down, each run once.

    uv run python benchmarks/catchup.py [--fires 10000] [--rounds 5] [--backends postgres redis]

Each round is a fleet that was down for `--fires` fires of a one-second task with
`catchup=` as long and `catchup_limit=` as large: a new lock name, so the run
history (PostgreSQL, on every setup) holds no record of any fire of the window. One
node then starts, builds its runtime as `firefly-scheduling run` does, and catches
up (`hosts.runtime.catch_up`); the time of that call is measured, from the history
read to the last fire's record. Setups: the task lock and the fire claims on
PostgreSQL, or on Redis.

Each round is then checked from outside the code under test: every body appended
its fire's instant to a witness file, and a second client (a history store of its
own) reads the window's records back. A round counts only with 0 duplicates and 0
missing in both, every record `caught_up`. Goal: under 60 s for 10,000 fires. The
figures go to `docs/results/catchup.md` and `catchup.json` (see `benchmark_results`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import types
import uuid
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import sqlalchemy as sa

from benchmark_results import Run, Table, add_arguments, servers_of, shorten, spread, summary
from firefly_scheduling import ScheduledDescriptor, Settings, current_fire
from firefly_scheduling.history.port import RunState
from firefly_scheduling.hosts.runtime.boot import build_runtime, validated
from firefly_scheduling.hosts.runtime.catch_up import catch_up
from firefly_scheduling_database.sql_history.store import DEFAULT_TABLE, SqlRunHistory

MODULE = "firefly_bench_catchup"
TARGET = f"{MODULE}:every_second"
GOAL_SECONDS = 60.0
WITNESS_VARIABLE = "FIREFLY_BENCH_CATCHUP_WITNESS"


def url(kind: str, default: str) -> str:
    return os.environ.get(f"FIREFLY_TEST_{kind.upper()}_URL", default)


def install_task_module() -> None:
    """The task's module: its body appends the fire's instant to the witness file."""

    def every_second() -> None:
        fire = current_fire()
        assert fire is not None
        line = f"{fire.instant.isoformat()}\n".encode()
        fd = os.open(os.environ[WITNESS_VARIABLE], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    module = types.ModuleType(MODULE)
    every_second.__module__ = MODULE
    module.every_second = every_second  # type: ignore[attr-defined]
    sys.modules[MODULE] = module


def one_round(backend: str, fires: int, witness: Path) -> dict[str, float | int]:
    """Catch up `fires` missed fires once; the time and the checks' counts."""
    postgres = url("postgres", "postgresql://postgres@127.0.0.1:5432/test")
    lock_url = postgres if backend == "postgres" else url("redis", "redis://127.0.0.1:6379/0")
    lock = f"bench-catchup-{uuid.uuid4().hex[:12]}"
    [descriptor] = validated(
        [
            ScheduledDescriptor(
                target=TARGET,
                fixed_rate=1.0,
                lock_name=lock,
                catchup=float(fires),
                catchup_limit=fires,
            )
        ]
    )
    settings = Settings(
        lock_provider=backend,
        lock_urls={backend: lock_url},
        history_url=postgres,
        node="bench-node",
    )
    witness.write_text("")
    os.environ[WITNESS_VARIABLE] = str(witness)
    runtime = build_runtime([descriptor], settings, host="run")
    try:
        started = time.perf_counter()
        [report] = catch_up([descriptor], runtime)
        seconds = time.perf_counter() - started
    finally:
        runtime.close()
    assert report.plan is not None
    planned = set(report.plan.run)
    reader = SqlRunHistory(postgres)  # a second client: the records as the server holds them
    try:
        window = report.plan.now - timedelta(seconds=fires)
        records = [r for r in reader.runs(TARGET, 2 * fires, lock=lock) if r.instant > window]
    finally:
        reader.close()
    ran = Counter(datetime.fromisoformat(line) for line in witness.read_text().splitlines())
    states = Counter(record.state for record in records)
    return {
        "seconds": seconds,
        "planned": len(planned),
        "witness_runs": sum(ran.values()),
        "witness_duplicates": sum(count - 1 for count in ran.values() if count > 1),
        "witness_missing": len(planned - set(ran)),
        "records": len(records),
        "records_missing": len(planned - {record.instant for record in records}),
        "records_caught_up": states[RunState.CAUGHT_UP],
    }


def history_table_note(postgres: str) -> str:
    """Whether the history table has this version's index of running records: a table
    created by an older version lacks it, and each fire's read of its task's running
    records then scans every record of the task."""
    engine = sa.create_engine(postgres.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        names = {index["name"] for index in sa.inspect(engine).get_indexes(DEFAULT_TABLE)}
    finally:
        engine.dispose()
    if f"{DEFAULT_TABLE}_running" in names:
        return f"The history table `{DEFAULT_TABLE}` as this version creates it (indexes included)."
    return (
        f"The history table `{DEFAULT_TABLE}` lacks this version's index of running records "
        "(created by an older version): each fire scans its task's records."
    )


def goal(seconds: list[float]) -> str:
    """Whether the median round met the goal, and how many rounds did not (a shared
    machine's load shows in the slowest rounds)."""
    over = sum(1 for each in seconds if each >= GOAL_SECONDS)
    verdict = "met" if statistics.median(seconds) < GOAL_SECONDS else "**not met**"
    return f"{verdict} (median); {over} of {len(seconds)} rounds over" if over else verdict


def checked(figures: dict[str, float | int], fires: int) -> bool:
    return (
        figures["planned"] == fires
        and figures["witness_runs"] == fires
        and figures["witness_duplicates"] == 0
        and figures["witness_missing"] == 0
        and figures["records_missing"] == 0
        and figures["records_caught_up"] == fires
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fires", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--backends", nargs="+", default=["postgres", "redis"], choices=["postgres", "redis"]
    )
    add_arguments(parser)
    arguments = parser.parse_args()
    shorten(arguments, parser, fires=1000, rounds=1)
    servers = servers_of(["postgres", *arguments.backends])
    run = Run("catchup", arguments, parser, servers=servers)
    install_task_module()
    postgres = url("postgres", "postgresql://postgres@127.0.0.1:5432/test")
    installer = SqlRunHistory(postgres)
    installer.install()  # a missing table is created as this version creates it
    installer.close()
    table_note = history_table_note(postgres)
    print(table_note)
    measured: dict[str, list[dict[str, float | int]]] = {}
    with tempfile.TemporaryDirectory(prefix="firefly-bench-catchup-") as directory:
        witness = Path(directory) / "witness.log"
        for backend in arguments.backends:
            for index in range(arguments.rounds):
                figures = one_round(backend, arguments.fires, witness)
                ok = checked(figures, arguments.fires)
                print(
                    f"{backend} round {index + 1}: {figures['seconds']:.1f} s for "
                    f"{figures['planned']} fires; witness {figures['witness_runs']} runs, "
                    f"{figures['witness_duplicates']} duplicates, {figures['witness_missing']} "
                    f"missing; history {figures['records_caught_up']} caught_up, "
                    f"{figures['records_missing']} missing: {'ok' if ok else 'FAILED'}",
                    flush=True,
                )
                if not ok:
                    raise SystemExit(f"{backend}: a fire was run twice or not at all: {figures}")
                measured.setdefault(backend, []).append(figures)
    rows = []
    for backend, rounds in measured.items():
        seconds = [r["seconds"] for r in rounds]
        rows.append(
            [
                f"{backend} lock and claims, PostgreSQL history",
                f"{arguments.fires:,}",
                spread(seconds, 1),
                spread([arguments.fires / s for s in seconds], 0, thousands=True),
                spread([s / arguments.fires * 1000 for s in seconds], 2),
                "0 / 0",
                goal(seconds),
            ]
        )
    table = Table(
        f"Catch-up of {arguments.fires:,} missed fires of one task, one node "
        f"({arguments.rounds} rounds; median (range))",
        [
            "setup",
            "fires",
            "seconds",
            "fires/s",
            "ms per fire",
            "duplicates / missing",
            "goal < 60 s",
        ],
        rows=rows,
        align="lrrrrrl",
    )
    print(table.markdown())
    run.write(
        "Catch-up of missed fires",
        [table],
        {
            backend: {
                "fires": arguments.fires,
                "seconds": summary([r["seconds"] for r in rounds]),
                "rounds": rounds,
            }
            for backend, rounds in measured.items()
        },
        notes=[
            table_note,
            "Each fire takes the path of any fire: its claim (one request per 200 fires), "
            "the task lock, the history's read of the task's running records, the start, "
            "the body, the end, the release. Fires of one task share its task lock, so "
            "they run one after the other.",
            "Checked each round: every planned fire's instant in the witness file exactly "
            "once, and its record `caught_up` in the history as a second client reads it; "
            "duplicates / missing are over all rounds.",
        ],
    )


if __name__ == "__main__":
    main()
