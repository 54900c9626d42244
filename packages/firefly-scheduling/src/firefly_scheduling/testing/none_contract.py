"""The reduced contract of a lock that provides no exclusion (`NoneLock`)."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from firefly_scheduling.locks.port import DistributedLock

LockFactory = Callable[[], DistributedLock]


class NoneLockContract:
    """The reduced contract of a lock that provides no exclusion."""

    @pytest.fixture
    def lock_factory(self) -> LockFactory:
        raise NotImplementedError

    def test_every_acquire_succeeds(self, lock_factory: LockFactory) -> None:
        first, second = lock_factory(), lock_factory()
        assert first.try_acquire("job", 30)
        assert first.try_acquire("job", 30)
        assert second.try_acquire("job", 30)
        first.release("job")
        first.release("never-held")

    @pytest.mark.parametrize("ttl", [0, -1, math.nan, math.inf])
    def test_bad_ttl_is_still_refused(self, lock_factory: LockFactory, ttl: float) -> None:
        with pytest.raises(ValueError):
            lock_factory().try_acquire("job", ttl)

    @pytest.mark.parametrize("bad_name", ["", "x" * 256, "a\x00b"])
    def test_bad_name_is_still_refused(self, lock_factory: LockFactory, bad_name: str) -> None:
        with pytest.raises(ValueError):
            lock_factory().try_acquire(bad_name, 30)
