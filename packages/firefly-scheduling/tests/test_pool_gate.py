"""The pool gate: a bound, a wait that ends in an error naming it, and waiters served in order."""

from __future__ import annotations

import threading
import time

import pytest

from firefly_scheduling.concurrency.fair_semaphore import FairSemaphore
from firefly_scheduling.concurrency.pool_gate import PoolGate
from firefly_scheduling.concurrency.pool_size import PoolExhaustedError


def test_a_caller_past_the_bound_waits_then_gets_an_error_naming_it() -> None:
    gate = PoolGate(1, wait_seconds=0.1)
    with gate.slot(), pytest.raises(PoolExhaustedError, match=r"pool_size=1"), gate.slot():
        pass
    with gate.slot():  # the slot came back
        pass


def test_waiters_are_served_in_the_order_they_came() -> None:
    semaphore = FairSemaphore(1)
    assert semaphore.acquire()
    served: list[int] = []

    def wait(index: int) -> None:
        assert semaphore.acquire(timeout=10)
        served.append(index)
        semaphore.release()

    threads = []
    for index in range(5):
        thread = threading.Thread(target=wait, args=(index,))
        thread.start()
        threads.append(thread)
        while len(semaphore._waiters) <= index:  # queued before the next one starts
            time.sleep(0.001)
    # The releasing thread asks again at once; it must queue behind the five.
    semaphore.release()
    assert semaphore.acquire(timeout=10)
    served.append(-1)
    semaphore.release()
    for thread in threads:
        thread.join()
    assert served == [0, 1, 2, 3, 4, -1]


def test_a_wait_that_times_out_leaves_no_trace() -> None:
    semaphore = FairSemaphore(1)
    assert semaphore.acquire()
    assert not semaphore.acquire(timeout=0.05)
    semaphore.release()
    assert semaphore.acquire(timeout=0)
