"""A Jepsen-style randomized fault checker for the fire guarantees.

    python benchmarks/chaos.py --seed 7 --seconds 60 --setups redis,postgres

Per setup: `--nodes` resident `run` nodes and a `tick` process per minute on one
backend, each behind its own TCP proxy, running the task mix of
`chaos_harness.tasks`, while a seeded nemesis injects faults (proxy latency,
stalls, resets and blackholes; SIGSTOP past the lease; SIGKILL and restart; a
private server's crash and restart, or the end of this run's SQL sessions; clock
offsets of ±2 s; a history whose writes fail, whose `start` fails or hangs, or
whose end-of-run writes fail for longer than the runner's retry window).
Afterwards the checker reads the evidence log (CLOCK_MONOTONIC stamps written by
the bodies and by the harness that sent the signals) and the run history (a second
client) and checks exclusion, at-most-once, that every fire is accounted for, and
that every run that ran is recorded with its real outcome (`chaos_harness.checker`).

Prints a table per setup and exits 1 on any violation, printing the seed and the
events around it. Setups run `--parallel` at a time, each in its own process.
Needs the servers of `scripts/ensure-servers` (FIREFLY_TEST_*_URL), and
redis-server and memcached binaries for the private instances.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

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
) -> list[SetupResult]:
    with ProcessPoolExecutor(max_workers=parallel) as pool:
        futures = [pool.submit(run_setup, s, seed, seconds, nodes, root, pace) for s in setups]
        pairs = zip(setups, futures, strict=True)
        return [_result_of(setup, seed, seconds, future) for setup, future in pairs]


def _result_of(setup: str, seed: int, seconds: float, future: Future[SetupResult]) -> SetupResult:
    """The setup's result; a harness failure is one too (reported, exit status 1)."""
    try:
        return future.result()
    except Exception as err:  # noqa: BLE001 - one setup's failure must not hide the others
        failed = SetupResult(setup, seed, seconds)
        failed.violations = [{"rule": "harness", "message": repr(err), "context": ()}]
        return failed


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
    parser.add_argument("--seconds", type=float, default=60.0, help="seconds of faults per setup")
    parser.add_argument("--setups", default=",".join(SETUPS), help="comma-separated setups")
    parser.add_argument("--nodes", type=int, default=3, help="resident nodes per setup")
    parser.add_argument("--parallel", type=int, default=2, help="setups run at once")
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
    root = args.workdir or Path(tempfile.mkdtemp(prefix="firefly-chaos-"))
    print(
        f"chaos: seed {seed}, {args.seconds:g}s per setup, pace {args.pace:g}, logs in {root}",
        flush=True,
    )
    results = run_all(setups, seed, args.seconds, args.nodes, args.parallel, root, args.pace)
    print(table(results))
    if args.json is not None:
        args.json.write_text(json.dumps([r.__dict__ for r in results], default=str, indent=1))
    violations = report_violations(results)
    print(f"\nchaos: seed {seed}: {violations} violation(s)")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
