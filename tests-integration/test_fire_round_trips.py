"""Round trips per fire: the claim adds one won acquisition to the node that runs the fire.

That is one round trip on every backend but etcd, where it is three. PostgreSQL and
MySQL also ask the server, just before the body, whether the session still holds the
task lock (a session lock has no lease to count on): one more round trip there.

Each node's lock talks to its server through a counting proxy
(`benchmarks/round_trips.py`, which also prints the table in docs/guarantees.md).
Counts are medians over several fires, so a driver's one-off (psycopg preparing a
statement on its fifth use) is not taken for the per-fire cost.
"""

from __future__ import annotations

import pytest

from round_trips import BACKENDS, Counts, measure

FIRES = 8
#: Fencing that cannot share the acquisition's round trip: MySQL/MariaDB cannot write
#: the lease table and the fence table in one statement (docs/guarantees.md, Cost).
SEPARATE_FENCE = {"database-mariadb": 1}
#: A won acquisition that costs more than one round trip, so the claim does too: etcd
#: reads the key, grants the lease, then creates the key (docs/backends/etcd.md).
WON_ACQUISITION = {"etcd": 3}
#: The pre-body check of a session lock: the server says whether the session holds it.
SESSION_CHECK = {"postgres": 1, "mysql": 1}


@pytest.fixture(scope="module", params=sorted(BACKENDS))
def counts(
    request: pytest.FixtureRequest,
    postgres_url: str,
    mysql_url: str,
    redis_url: str,
    memcached_url: str,
    etcd_url: str,
) -> tuple[str, Counts]:
    backend: str = request.param
    urls = {"postgres": postgres_url, "mysql": mysql_url}
    urls |= {"redis": redis_url, "memcached": memcached_url, "etcd": etcd_url}
    return backend, measure(backend, FIRES, urls)


def test_a_node_that_loses_the_claim_pays_what_a_lost_lock_attempt_paid(
    counts: tuple[str, Counts],
) -> None:
    _, measured = counts
    assert Counts.typical(measured.lose) == Counts.typical(measured.guard_lose) == 1


def test_the_claim_adds_at_most_one_won_acquisition_to_the_running_node(
    counts: tuple[str, Counts],
) -> None:
    backend, measured = counts
    extra = Counts.typical(measured.run) - Counts.typical(measured.guard_run)
    allowed = WON_ACQUISITION.get(backend, 1) + SEPARATE_FENCE.get(backend, 0)
    assert extra <= allowed + SESSION_CHECK.get(backend, 0), measured


def test_no_backend_releases_a_claim_later(counts: tuple[str, Counts]) -> None:
    """A claim outlives its claimer on every backend (rows on PostgreSQL and MySQL)."""
    _, measured = counts
    assert measured.deferred == 0
