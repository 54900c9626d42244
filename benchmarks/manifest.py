"""Scan versus manifest load, for an application with 10,000 `@scheduled` tasks.

    uv run python benchmarks/manifest.py [--tasks 10000] [--rounds 7]

It generates a package of task modules in a temporary directory (module functions
and methods; fixed rates, fixed delays and crons in several zones; locked and
unlocked), compiles its manifest once, then times, each round in a fresh Python
process so that nothing is already imported or cached:

* `scan([package])`: imports every module and validates every task;
* `ScheduledManifest.load(path)`: reads the JSON and validates every task, importing
  no application module.

Only the call itself is timed (not interpreter start-up). Bytecode is compiled by
a warm-up scan first, as it would be on a deployed host. Targets: load at least
10x faster than scan, and under 50 ms. The figures go to `docs/results/manifest.md`
and `manifest.json` (see `benchmark_results`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from benchmark_results import Run, Table, add_arguments, shorten, spread, summary
from firefly_scheduling import ScheduledManifest, scan

PACKAGE = "firefly_bench_app"
TASKS_PER_MODULE = 100
CRONS = [
    ("*/5 * * * *", None),
    ("0 3 * * *", "Europe/Paris"),
    ("30 2 * * 0", "America/New_York"),
    ("0 */6 * * 1-5", "Asia/Tokyo"),
    ("@hourly", None),
]
RATES = ["1s", "30s", "5m", "PT1H", "250ms", 90]

TIMED = textwrap.dedent(
    """
    import json, sys, time
    sys.path.insert(0, {root!r})
    from firefly_scheduling import ScheduledManifest, scan
    started, started_cpu = time.perf_counter(), time.process_time()
    if {mode!r} == "scan":
        count = len(scan([{package!r}]))
    else:
        count = len(ScheduledManifest.load({manifest!r}).descriptors)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - started_cpu
    imported = sum(1 for name in sys.modules if name.startswith({package!r}))
    print(json.dumps({{"seconds": elapsed, "cpu": cpu, "count": count, "imported": imported}}))
    """
)


def task_source(number: int, name: str, *, method: bool) -> str:
    """One decorated task; the trigger mix cycles with `number`."""
    kind = number % 3
    lock = ", lock=True" if number % 2 else ", lock=False"
    if kind == 0:
        expression, zone = CRONS[number % len(CRONS)]
        zone_argument = f", zone={zone!r}" if zone else ""
        trigger = f"cron={expression!r}{zone_argument}"
    elif kind == 1:
        trigger = f"fixed_rate={RATES[number % len(RATES)]!r}"
    else:
        trigger = f"fixed_delay={RATES[number % len(RATES)]!r}, initial_delay='10s'"
    return f"@scheduled({trigger}{lock})\ndef {name}({'self' if method else ''}):\n    pass\n"


def module_source(module_index: int) -> str:
    """A module of tasks: nine in ten are module functions, one in ten methods of a class."""
    functions, methods = [], []
    for task_index in range(TASKS_PER_MODULE):
        number = module_index * TASKS_PER_MODULE + task_index
        if task_index % 10 == 0:
            source = task_source(number, f"method_{task_index}", method=True)
            methods.append(textwrap.indent(source, "    "))
        else:
            functions.append(task_source(number, f"task_{task_index}", method=False))
    return (
        "from firefly_scheduling import scheduled\n\n\n"
        + "\n".join(functions)
        + "\n\nclass Jobs:\n"
        + "\n".join(methods)
    )


def generate(root: Path, tasks: int) -> None:
    package = root / PACKAGE
    package.mkdir()
    (package / "__init__.py").write_text("")
    for module_index in range(tasks // TASKS_PER_MODULE):
        (package / f"tasks_{module_index:04d}.py").write_text(module_source(module_index))


def timed(mode: str, root: Path, manifest: Path) -> dict[str, float]:
    program = TIMED.format(root=str(root), mode=mode, package=PACKAGE, manifest=str(manifest))
    result = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    measured: dict[str, float] = json.loads(result.stdout)
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=7)
    add_arguments(parser)
    arguments = parser.parse_args()
    shorten(arguments, parser, tasks=1000, rounds=2)
    run = Run("manifest", arguments, parser)

    with tempfile.TemporaryDirectory(prefix="firefly-bench-") as directory:
        root = Path(directory)
        generate(root, arguments.tasks)
        manifest = root / ".firefly" / "scheduled.json"
        sys.path.insert(0, str(root))
        descriptors = scan([PACKAGE])  # also compiles bytecode for the timed rounds
        ScheduledManifest.compile(descriptors, manifest, packages=[PACKAGE])
        manifest_kib = manifest.stat().st_size / 1024
        print(
            f"{len(descriptors)} tasks in {arguments.tasks // TASKS_PER_MODULE} modules; "
            f"manifest {manifest.stat().st_size / 1024:.0f} KiB"
        )

        scans: list[dict[str, float]] = []
        loads: list[dict[str, float]] = []
        for _ in range(arguments.rounds):
            scans.append(timed("scan", root, manifest))
            loads.append(timed("load", root, manifest))
            assert scans[-1]["count"] == loads[-1]["count"] == len(descriptors)
            assert loads[-1]["imported"] == 0, "loading the manifest imported application code"

    def median(rounds: list[dict[str, float]], key: str) -> float:
        return statistics.median(measured[key] for measured in rounds)

    scan_wall, load_wall = median(scans, "seconds"), median(loads, "seconds")
    scan_cpu, load_cpu = median(scans, "cpu"), median(loads, "cpu")
    print(f"medians over {arguments.rounds} fresh processes (wall clock; CPU time of the process)")
    print(f"  scan: {scan_wall * 1000:8.1f} ms  ({scan_cpu * 1000:.1f} ms CPU)")
    print(f"  load: {load_wall * 1000:8.1f} ms  ({load_cpu * 1000:.1f} ms CPU)")
    ratio = scan_wall / load_wall
    print(f"load is {ratio:.1f}x faster than scan ({scan_cpu / load_cpu:.1f}x in CPU time)")
    print(f"target load >= 10x faster than scan: {'met' if ratio >= 10 else 'MISSED'}")
    print(f"target load < 50 ms: {'met' if load_wall < 0.050 else 'MISSED'}")
    print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    table = Table(
        f"{arguments.tasks:,} tasks: scan against manifest load, each in a fresh process",
        ["call", "wall ms, median (range)", "CPU ms, median"],
        rows=[
            [
                "`scan([package])`",
                spread([r["seconds"] * 1000 for r in scans], 1),
                f"{scan_cpu * 1000:.1f}",
            ],
            [
                "`ScheduledManifest.load(path)`",
                spread([r["seconds"] * 1000 for r in loads], 1),
                f"{load_cpu * 1000:.1f}",
            ],
        ],
        align="lrr",
    )
    run.write(
        "Manifest load against scan",
        [table],
        {
            "tasks": arguments.tasks,
            "manifest_kib": manifest_kib,
            "scan_ms": summary([r["seconds"] * 1000 for r in scans]),
            "load_ms": summary([r["seconds"] * 1000 for r in loads]),
            "scan_cpu_ms": scan_cpu * 1000,
            "load_cpu_ms": load_cpu * 1000,
            "load_speedup": ratio,
        },
        notes=[
            f"{arguments.rounds} rounds; only the call is timed, bytecode compiled first. "
            f"Manifest {manifest_kib:.0f} KiB; loading it imported no application module.",
            f"Load is {ratio:.1f} times faster than scan ({scan_cpu / load_cpu:.1f} in CPU "
            f"time). Targets: at least 10 times faster "
            f"({'met' if ratio >= 10 else '**not met**'}) and under 50 ms "
            f"({'met' if load_wall < 0.050 else '**not met**'}).",
        ],
    )


if __name__ == "__main__":
    main()
