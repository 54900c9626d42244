"""Fire claim names, windows, and how claims are kept on lease and session backends."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from firefly_scheduling.fires.claims import CLAIM_PREFIX, FireClaims, claim_name, claim_seconds
from firefly_scheduling.locks import BaseLock, InMemoryLock
from firefly_scheduling.locks.validation import MAX_LOCK_NAME_LENGTH, validate_lock_name

INSTANT = datetime(2030, 5, 17, 8, 30, 0, tzinfo=UTC)
names = st.text(st.characters(exclude_characters="\x00"), min_size=1, max_size=255)


class TestClaimName:
    def test_a_task_locked_under_its_own_name_gets_a_readable_claim(self) -> None:
        name = claim_name("app.jobs:report", "app.jobs:report", INSTANT)
        assert name == f"{CLAIM_PREFIX}20300517T083000.000000Z:app.jobs:report"

    def test_the_instant_is_named_in_utc_to_the_microsecond(self) -> None:
        paris = INSTANT.astimezone(timezone(timedelta(hours=2)))
        assert claim_name("t:f", "t:f", paris) == claim_name("t:f", "t:f", INSTANT)
        later = INSTANT + timedelta(microseconds=1)
        assert claim_name("t:f", "t:f", later) != claim_name("t:f", "t:f", INSTANT)

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
    """A session-scoped lock in a dict: the TTL is ignored, the hold lasts until released."""

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


class TestFireClaims:
    def test_a_lease_claim_is_forgotten_locally_and_lives_on_the_server(self) -> None:
        name = f"claim-{uuid.uuid4()}"
        lock = InMemoryLock()
        claims = FireClaims(lock)
        assert claims.claim(name, 30)
        assert not lock.is_held(name)  # no local bookkeeping left behind
        assert claims.held() == 0
        assert not InMemoryLock().try_acquire(name, 30)  # but every node is blocked
        assert not claims.claim(name, 30)

    def test_a_session_claim_is_kept_and_released_once_its_window_passed(self) -> None:
        now = [100.0]
        name = f"claim-{uuid.uuid4()}"
        lock = FakeSessionLock()
        claims = FireClaims(lock, monotonic=lambda: now[0])
        assert claims.claim(name, 65)
        assert not FakeSessionLock().try_acquire(name, 1)
        now[0] = 164.9
        assert claims.release_due() == 0
        assert lock.is_held(name)
        now[0] = 165.0
        assert claims.release_due() == 1
        assert not lock.is_held(name)
        assert FakeSessionLock().try_acquire(name, 1)

    def test_close_releases_every_session_claim(self) -> None:
        lock = FakeSessionLock()
        claims = FireClaims(lock, monotonic=lambda: 0.0)
        taken = [f"claim-{uuid.uuid4()}" for _ in range(3)]
        for name in taken:
            assert claims.claim(name, 60)
        claims.close()
        assert claims.held() == 0
        assert not any(name in FakeSessionLock.table for name in taken)

    def test_a_claim_lost_with_its_session_is_forgotten_not_released(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        now = [0.0]
        name = f"claim-{uuid.uuid4()}"
        lock = FakeSessionLock()
        claims = FireClaims(lock, monotonic=lambda: now[0])
        assert claims.claim(name, 60)
        lock._held[name].lost = True  # what SessionLock does when its session dies
        del FakeSessionLock.table[name]
        now[0] = 61.0
        assert claims.release_due() == 1
        assert not lock.is_lost(name)
        assert "lost before release" not in caplog.text

    def test_forget_refuses_a_live_session_hold(self) -> None:
        name = f"claim-{uuid.uuid4()}"
        lock = FakeSessionLock()
        assert lock.try_acquire(name, 1)
        with pytest.raises(NotImplementedError):
            lock.forget(name)
        lock.release(name)
