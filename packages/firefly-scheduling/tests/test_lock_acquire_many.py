"""`BaseLock.acquire_many`'s own rules, on the in-process lock (the contract suite runs
the same calls on every real server): bad input refused before anything is taken,
and an error that fails one acquisition leaves the others' answers standing."""

from __future__ import annotations

import math
import uuid

import pytest

from firefly_scheduling.errors import LockBackendError
from firefly_scheduling.locks import InMemoryLock
from firefly_scheduling.locks.holding import Holding


@pytest.mark.parametrize(("bad", "message"), [(("", 30.0), "name"), (("ok-too", math.nan), "ttl")])
def test_a_bad_name_or_ttl_refuses_the_whole_batch_before_anything_is_taken(
    bad: tuple[str, float], message: str
) -> None:
    lock = InMemoryLock()
    first = f"first-{uuid.uuid4().hex}"
    with pytest.raises(ValueError, match=message):
        lock.acquire_many([(first, 30.0), bad])
    assert lock.holding(first) is None, "a refused batch took a lock"
    assert lock.try_acquire(first, 30.0)
    lock.release(first)


class FailingOne(InMemoryLock):
    """The in-process lock whose server "fails" for one name (a driver error)."""

    driver_errors = (OSError,)

    def _acquire(self, name: str, owner: str, ttl_seconds: float) -> bool:
        if name == "broken":
            raise OSError("connection reset by peer (injected)")
        return super()._acquire(name, owner, ttl_seconds)


def test_one_acquisition_that_fails_is_its_own_error_and_leaves_nothing_reserved() -> None:
    lock = FailingOne()
    a, b = f"a-{uuid.uuid4().hex}", f"b-{uuid.uuid4().hex}"
    first, broken, last = lock.acquire_many([(a, 30.0), ("broken", 30.0), (b, 30.0)])
    assert isinstance(first, Holding)
    assert isinstance(last, Holding)
    assert isinstance(broken, LockBackendError)
    assert "broken" in str(broken)
    assert "connection reset" in str(broken)
    assert lock.holding("broken") is None, "a failed acquisition stayed reserved"
    assert lock.acquire_many([(a, 30.0)]) == [None], "a holding of the batch was dropped"
    lock.close()
