"""The etcd waiters' queue keys: one name's prefix never covers another name's tickets."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from firefly_scheduling.locks.holding import new_owner_token
from firefly_scheduling_etcd import protocol, waiter_queue

lock_names = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\x00"),
    min_size=1,
    max_size=255,
)


@given(lock_names, lock_names)
def test_a_names_queue_prefix_covers_its_own_tickets_only(name: str, other: str) -> None:
    ticket = new_owner_token()
    key = waiter_queue.ticket_key(other, ticket)
    assert key.startswith(waiter_queue.queue_prefix(name)) == (name == other)


@given(lock_names)
def test_queue_keys_are_outside_the_watched_lock_prefix(name: str) -> None:
    key = waiter_queue.ticket_key(name, new_owner_token())
    assert not key.startswith(protocol.LOCK_KEY_PREFIX.encode())
