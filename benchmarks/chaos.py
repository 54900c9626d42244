"""A Jepsen-style randomized fault checker for the fire guarantees.

    uv run python benchmarks/chaos.py                     # a fresh seed, 700 s, every setup
    uv run python benchmarks/chaos.py --seed 7 --seconds 60 --setups redis,postgres

Per setup: `--nodes` resident `run` nodes and a `tick` process per minute on one
backend, each behind its own TCP proxy, running the task mix of
`chaos_harness.tasks`, while a seeded nemesis injects faults (proxy latency,
stalls, resets and blackholes; SIGSTOP past the lease; SIGKILL and restart; a
private server's crash and restart, or the end of this run's SQL sessions; clock
offsets of ±2 s; a history whose writes fail, whose `start` fails or hangs, or
whose end-of-run writes fail for longer than the runner's retry window), and an
operator's process pausing, resuming, triggering and backfilling one task
(`chaos_harness.steering_nemesis`; `FIREFLY_CHAOS_STEERING=0` leaves it out).
Afterwards the checker reads the evidence log (CLOCK_MONOTONIC stamps written by
the bodies and by the harness that sent the signals) and the run history (a second
client) and checks exclusion, at-most-once, that every fire is accounted for, and
that every run that ran is recorded with its real outcome, and the steering rules
(`chaos_harness.checker`, `chaos_harness.steering_rules`).

Prints a table per setup and exits 1 on any violation, printing the seed and the
events around it. Setups run `--parallel` at a time (all at once by default), each
in its own process. The table also goes to `docs/results/chaos.md` and `chaos.json`
(see `benchmark_results`); a `--recheck` writes none.
Needs the servers of `scripts/ensure-servers` (FIREFLY_TEST_*_URL), and
redis-server and memcached binaries for the private instances.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from collections.abc import Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchmark_results import Run, Table, add_arguments, servers_of, shorten
from chaos_harness.run import SetupResult, recheck, run_setup, table
from chaos_harness.setups import SETUPS


def run_all(
    setups: list[str],
    seed: int,
    seconds: float,
    nodes: int,
    parallel: int,
    root: Path,
    pace: float = 1.0,
    seconds_of: Mapping[str, float] | None = None,
) -> list[SetupResult]:
    """Run `setups`, each for `seconds` of faults (or its own, in `seconds_of`)."""
    lengths = {s: (seconds_of or {}).get(s, seconds) for s in setups}
    with ProcessPoolExecutor(max_workers=parallel) as pool:
        futures = [pool.submit(run_setup, s, seed, lengths[s], nodes, root, pace) for s in setups]
        pairs = zip(setups, futures, strict=True)
        return [_result_of(setup, seed, lengths[setup], future) for setup, future in pairs]


def _result_of(setup: str, seed: int, seconds: float, future: Future[SetupResult]) -> SetupResult:
    """The setup's result; a harness failure is one too (reported, exit status 1)."""
    try:
        return future.result()
    except Exception as err:  # noqa: BLE001 - one setup's failure must not hide the others
        failed = SetupResult(setup, seed, seconds)
        failed.violations = [{"rule": "harness", "message": repr(err), "context": ()}]
        return failed


def policy_lines(results: list[SetupResult]) -> str:
    """What the policy rules saw per setup: proof each policy was exercised."""
    return "\n".join(
        f"{r.setup}: retries {r.retries}; "
        + ", ".join(f"{what} {count}" for what, count in sorted(r.policy.items()))
        for r in results
    )


def report_violations(results: list[SetupResult]) -> int:
    count = 0
    for result in results:
        for violation in result.violations:
            count += 1
            print(f"\nVIOLATION [{result.setup}, seed {result.seed}] {violation['rule']}:")
            print(f"  {violation['message']}")
            for event in violation["context"]:  # type: ignore[attr-defined]
                print(f"    {json.dumps(event)}")
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=None, help="replay this fault schedule")
    parser.add_argument("--seconds", type=float, default=700.0, help="seconds of faults per setup")
    parser.add_argument("--setups", default=",".join(SETUPS), help="comma-separated setups")
    parser.add_argument("--nodes", type=int, default=3, help="resident nodes per setup")
    parser.add_argument(
        "--parallel", type=int, default=len(SETUPS), help="setups run at once [default: all]"
    )
    parser.add_argument(
        "--pace", type=float, default=1.0, help="stretch every task's rate by this factor"
    )
    parser.add_argument("--workdir", type=Path, default=None, help="keep logs here")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    parser.add_argument(
        "--recheck",
        type=Path,
        default=None,
        metavar="DIR",
        help="check the setups of a finished run's --workdir again, running nothing",
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    if args.recheck is not None:
        results = [recheck(path.parent) for path in sorted(args.recheck.glob("*/result.json"))]
        print(table(results))
        return 1 if report_violations(results) else 0
    seed = args.seed if args.seed is not None else random.randrange(1_000_000)
    setups = [s.strip() for s in args.setups.split(",") if s.strip()]
    unknown = sorted(set(setups) - set(SETUPS))
    if unknown:
        parser.error(f"unknown setup(s) {', '.join(unknown)}; known: {', '.join(SETUPS)}")
    shorten(args, parser, seconds=20.0, nodes=2, pace=3.0, parallel=4)
    run = Run(
        "chaos",
        args,
        parser,
        servers=servers_of(_BACKEND_OF.get(s, s) for s in setups),
        selectors=("seed",),
    )
    root = args.workdir or Path(tempfile.mkdtemp(prefix="firefly-chaos-"))
    print(
        f"chaos: seed {seed}, {args.seconds:g}s per setup, pace {args.pace:g}, logs in {root}",
        flush=True,
    )
    results = run_all(setups, seed, args.seconds, args.nodes, args.parallel, root, args.pace)
    print(table(results))
    print(policy_lines(results))
    if args.json is not None:
        args.json.write_text(json.dumps([r.__dict__ for r in results], default=str, indent=1))
    violations = report_violations(results)
    print(f"\nchaos: seed {seed}: {violations} violation(s)")
    write_results(run, results, seed)
    return 1 if violations else 0


#: The server a setup runs on, for the versions its results file names.
_BACKEND_OF = {
    "database-postgres": "postgres",
    "database-mariadb": "mysql",
    "database-sqlite": "sqlite",
    "effects-postgres": "postgres",
    "effects-mysql": "mysql",
    "effects-sqlite": "sqlite",
}

COLUMNS = [
    "setup",
    "fires",
    "ran",
    "adopted",
    "fenced overlaps",
    "reruns after a double fault",
    "late zombie bodies",
    "violations",
    "misses (recorded reasons)",
    "faults injected",
]


def write_results(run: Run, results: list[SetupResult], seed: int) -> None:
    """The run's table and every violation, as `docs/results/chaos.md` and its JSON."""
    table = Table(f"Seed {seed}: every setup", COLUMNS, align="lrrrrrrrll")
    figures = []
    for r in results:
        misses = sum(r.misses.values())
        reasons = "; ".join(f"{count} {reason}" for reason, count in r.misses.items())
        faults = ", ".join(
            f"{kind} {r.faults.get(kind, 0)}" for kind in sorted(r.applicable or r.faults)
        )
        table.rows.append(
            [
                r.setup,
                f"{r.fires:,}",
                f"{r.ran:,}",
                str(r.adoptions),
                str(r.fenced_overlaps),
                str(r.double_fault_reruns),
                str(r.late_zombie_bodies),
                f"**{len(r.violations)}**",
                f"{misses:,}" + (f" ({reasons})" if reasons else ""),
                faults,
            ]
        )
        figures.append(
            {
                "setup": r.setup,
                "seed": r.seed,
                "seconds": r.seconds,
                "pace": r.pace,
                "fires": r.fires,
                "ran": r.ran,
                "body_runs": r.body_runs,
                "adopted": r.adoptions,
                "fenced_overlaps": r.fenced_overlaps,
                "reruns_after_a_double_fault": r.double_fault_reruns,
                "late_zombie_bodies": r.late_zombie_bodies,
                "violations": [{"rule": v["rule"], "message": v["message"]} for v in r.violations],
                "misses": r.misses,
                "faults": r.faults,
                "history_refusals": r.history_refusals,
                "effects": r.effects,
            }
        )
    tables = [table]
    violated = [(r.setup, v) for r in results for v in r.violations]
    if violated:
        tables.append(
            Table(
                "Violations",
                ["setup", "rule", "message"],
                rows=[[setup, str(v["rule"]), str(v["message"])] for setup, v in violated],
            )
        )
    run.write(
        "Randomized faults",
        tables,
        figures,
        notes=[
            f"Seed {seed}: {run.args.nodes} resident nodes and a `tick` per setup, "
            f"{run.args.seconds:g} s of faults each, pace {run.args.pace:g}, "
            f"{run.args.parallel} setup(s) at once. Replay the same faults with `--seed {seed}`.",
            "A violation breaks exclusion, at most once, or every fire ran or recorded; "
            "fenced overlaps, reruns after a double fault and late zombie bodies are the "
            "allowed cases the checker counts apart (see Guarantees).",
        ],
    )


if __name__ == "__main__":
    sys.exit(main())
