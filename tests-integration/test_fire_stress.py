"""Stress: 16 node processes x 50 locked `fixed_rate='1s'` tasks for 20 s, database on PostgreSQL.

The harness is `benchmarks/stress.py` (the full 60 s run, and the figures, are its
job): every node is a real resident host with the database lock and run history on
one PostgreSQL. Here the run is shorter, and only what must hold whatever the load
is asserted: no fire ran twice, every node finished cleanly and claimed, and misses
stay rare. A miss is a fire whose claim was won while the previous fire of its task
still held the task lock (skipped and recorded, by design), or that no node named in
time because every node was busy; both only come from an overloaded machine (the
benchmark reports them), so the bound is loose. No timing is asserted.
"""

from __future__ import annotations

import pytest

from stress import run_stress
from stress_report import StressReport

#: Its timing depends on the machine's load: runs alone under xdist.
pytestmark = [pytest.mark.slow, pytest.mark.alone]

PROCESSES, TASKS, SECONDS = 16, 50, 20
#: Share of the window's fires that may be missed on a saturated machine.
MISS_BOUND = 0.15


@pytest.fixture(scope="module")
def report(postgres_url: str, tmp_path_factory: pytest.TempPathFactory) -> StressReport:
    measured = run_stress(
        postgres_url,
        processes=PROCESSES,
        tasks=TASKS,
        seconds=SECONDS,
        workers=2,
        workdir=tmp_path_factory.mktemp("stress"),
    )
    print(measured.table())  # shown with -s: the figures of this run
    return measured


def test_no_fire_ran_twice(report: StressReport) -> None:
    assert report.duplicates == {}


def test_every_node_finished_cleanly_and_took_part(report: StressReport) -> None:
    """Every node contested the window's fires; which node wins them is not promised.

    A resident host claims the fires of one instant together, so the node whose
    batch reaches the server first wins most of that instant: over 20 instants a
    node may win none (one CI run: 13 of 16 nodes ran fires), and still took part.
    """
    assert report.exit_codes == [0] * PROCESSES
    assert sorted(report.attempts_per_node) == [f"node{n:02d}" for n in range(PROCESSES)]
    assert report.runs_per_node, "no node ran a fire"


def test_misses_stay_rare_and_every_run_is_a_won_claim(
    report: StressReport,
) -> None:
    assert report.expected == TASKS * SECONDS
    assert report.fires_run + len(report.misses) == report.expected
    assert len(report.misses) <= MISS_BOUND * report.expected, report.table()
    # Every attempt was either the one run or found the fire claimed, or was a
    # recorded skip: a node never runs a fire it did not claim.
    assert report.statuses["succeeded"] == report.fires_run
