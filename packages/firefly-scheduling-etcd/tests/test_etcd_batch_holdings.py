"""`BatchHoldings`: the record of holdings on a batch lease never outgrows the live ones."""

from __future__ import annotations

import time

from firefly_scheduling_etcd.batch_holdings import BatchHoldings


def test_a_holding_is_taken_once_and_put_back_after_a_failure() -> None:
    holdings = BatchHoldings()
    deadline = time.monotonic() + 30
    holdings.add([("owner-a", deadline), ("owner-b", deadline)])
    assert holdings.take("owner-a") == deadline
    assert holdings.take("owner-a") is None, "taken twice: released or renewed twice"
    holdings.put_back("owner-a", deadline)
    assert holdings.take("owner-a") == deadline
    assert holdings.take("never-added") is None


def test_lapsed_holdings_are_forgotten_when_a_batch_is_added() -> None:
    """A lapsed holding is never released or renewed by the base lock, so nothing
    else would ever take it out: 10,000 lapsed ones must not stay."""
    holdings = BatchHoldings()
    lapsed = time.monotonic() - 1
    holdings.add((f"old-{index}", lapsed) for index in range(10_000))
    live = time.monotonic() + 30
    holdings.add([("new", live)])
    assert len(holdings) == 1
    assert holdings.take("new") == live
