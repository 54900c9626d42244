"""Fire claim names, windows, and how claims are kept on lease and session backends."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from firefly_scheduling.fires.claims import CLAIM_PREFIX, claim_name, claim_seconds
from firefly_scheduling.locks import BaseLock, InMemoryLock
from firefly_scheduling.locks.port_holdings import claiming_lock
from firefly_scheduling.locks.validation import MAX_LOCK_NAME_LENGTH, validate_lock_name

INSTANT = datetime(2030, 5, 17, 8, 30, 0, tzinfo=UTC)
names = st.text(st.characters(exclude_characters="\x00"), min_size=1, max_size=255)


class TestClaimName:
    def test_a_task_locked_under_its_own_name_gets_a_readable_claim(self) -> None:
        name = claim_name("app.jobs:report", "app.jobs:report", INSTANT)
        assert name == f"{CLAIM_PREFIX}20300517T083000.000000Z:app.jobs:report"

    def test_the_instant_is_named_in_utc_to_the_microsecond(self) -> None:
        later = INSTANT + timedelta(microseconds=1)
        assert claim_name("t:f", "t:f", later) != claim_name("t:f", "t:f", INSTANT)

    def test_an_instant_in_another_zone_is_refused_not_converted_again(self) -> None:
        # A fire's instant is made UTC once, by `Fire.at`; another zone here is a
        # caller's defect that would name another claim on each node.
        paris = INSTANT.astimezone(timezone(timedelta(hours=2)))
        with pytest.raises(ValueError, match="in UTC"):
            claim_name("t:f", "t:f", paris)

    def test_a_naive_instant_is_refused(self) -> None:
        with pytest.raises(ValueError):
            claim_name("t:f", "t:f", INSTANT.replace(tzinfo=None))

    def test_tasks_sharing_a_lock_name_have_a_claim_each(self) -> None:
        first = claim_name("app.jobs:a", "shared", INSTANT)
        second = claim_name("app.jobs:b", "shared", INSTANT)
        assert first != second
        assert first.startswith(f"{CLAIM_PREFIX}20300517T083000.000000Z:sha256:")

    def test_a_name_that_looks_hashed_is_hashed_itself(self) -> None:
        looks_hashed = "sha256:" + "0" * 64
        assert claim_name(looks_hashed, looks_hashed, INSTANT) != (
            f"{CLAIM_PREFIX}20300517T083000.000000Z:{looks_hashed}"
        )

    @given(target=names, lock_name=names)
    def test_every_claim_is_a_valid_lock_name(self, target: str, lock_name: str) -> None:
        name = claim_name(target, lock_name, INSTANT)
        assert validate_lock_name(name) == name
        assert len(name) <= MAX_LOCK_NAME_LENGTH
        assert name == claim_name(target, lock_name, INSTANT)  # deterministic

    @given(first=st.tuples(names, names), second=st.tuples(names, names))
    def test_distinct_tasks_never_share_a_claim(
        self, first: tuple[str, str], second: tuple[str, str]
    ) -> None:
        if first != second:
            assert claim_name(*first, INSTANT) != claim_name(*second, INSTANT)


class TestClaimSeconds:
    def test_the_window_ends_grace_plus_skew_after_the_instant(self) -> None:
        now = INSTANT + timedelta(seconds=10)
        assert claim_seconds(INSTANT, now, grace=60, clock_skew=5) == pytest.approx(55)

    def test_a_node_ahead_of_the_instant_holds_longer(self) -> None:
        now = INSTANT - timedelta(seconds=2)
        assert claim_seconds(INSTANT, now, grace=60, clock_skew=5) == pytest.approx(67)

    def test_the_last_claimable_moment_still_leaves_the_skew(self) -> None:
        now = INSTANT + timedelta(seconds=60)
        assert claim_seconds(INSTANT, now, grace=60, clock_skew=5) == pytest.approx(5)


class FakeSessionLock(BaseLock):
    """A session-scoped lock in a dict that does not implement fire claims."""

    backend_name = "fake-session"
    ttl_honoured = False
    session_scoped = True
    cross_process = False
    driver_errors = ()
    table: ClassVar[dict[str, str]] = {}

    def _acquire(self, name: str, owner: str, ttl_seconds: float) -> bool:
        return self.table.setdefault(name, owner) == owner

    def _release(self, name: str, owner: str) -> bool:
        if self.table.get(name) != owner:
            return False
        del self.table[name]
        return True


class PortOnlyLock:
    """A third-party lock with the port alone, in front of the memory backend."""

    def __init__(self) -> None:
        self.inner = InMemoryLock()

    def try_acquire(self, name: str, ttl_seconds: float) -> bool:
        return self.inner.try_acquire(name, ttl_seconds)

    def release(self, name: str) -> None:
        self.inner.release(name)


class TestClaims:
    def test_a_lease_claim_is_not_tracked_locally_and_lives_on_the_server(self) -> None:
        name = f"claim-{uuid.uuid4()}"
        lock = InMemoryLock()
        assert lock.try_claim(name, 30)
        assert lock.holding(name) is None  # no local bookkeeping left behind
        assert not InMemoryLock().try_acquire(name, 30)  # but every node is blocked
        assert not lock.try_claim(name, 30)

    def test_a_lease_claim_ends_with_its_window(self) -> None:
        name = f"claim-{uuid.uuid4()}"
        assert InMemoryLock().try_claim(name, 0.05)
        time.sleep(0.1)
        assert InMemoryLock().try_claim(name, 30)

    def test_closing_the_claimer_keeps_its_claims(self) -> None:
        name = f"claim-{uuid.uuid4()}"
        lock = InMemoryLock()
        assert lock.try_claim(name, 30)
        lock.close()
        assert not InMemoryLock().try_claim(name, 30)

    def test_a_session_backend_without_claim_rows_refuses_to_claim(self) -> None:
        with pytest.raises(NotImplementedError, match="fire claims"):
            FakeSessionLock().try_claim(f"claim-{uuid.uuid4()}", 30)

    def test_a_port_only_lock_claims_with_a_plain_acquisition(self) -> None:
        name = f"claim-{uuid.uuid4()}"
        lock = PortOnlyLock()
        claims = claiming_lock(lock)
        assert claims is not lock
        assert claims.try_claim(name, 30)
        assert not claims.try_claim(name, 30)
        assert not InMemoryLock().try_acquire(name, 30)

    def test_claim_seconds_are_validated(self) -> None:
        with pytest.raises(ValueError, match="claim seconds"):
            InMemoryLock().try_claim("claim", 0)
