"""The waiters' queue items: legal memcached keys, one per (name, number), never a lock's."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from firefly_scheduling_memcached import MemcachedLock, waiter_queue

lock_names = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\x00"),
    min_size=1,
    max_size=255,
)
numbers = st.integers(min_value=0, max_value=2**63)


def _legal(key: bytes) -> bool:
    return len(key) <= 250 and all(0x21 <= byte <= 0x7E for byte in key)


@given(lock_names, numbers)
def test_every_queue_key_is_legal(name: str, number: int) -> None:
    keys = (
        waiter_queue.counter_key(name),
        waiter_queue.floor_key(name),
        waiter_queue.ticket_key(name, number),
    )
    assert all(_legal(key) for key in keys), keys
    assert len(set(keys)) == 3
    assert MemcachedLock.key(name).encode() not in keys


@given(lock_names, numbers, lock_names, numbers)
def test_two_tickets_share_a_key_only_when_name_and_number_do(
    name: str, number: int, other: str, other_number: int
) -> None:
    same = (name, number) == (other, other_number)
    assert (
        waiter_queue.ticket_key(name, number) == waiter_queue.ticket_key(other, other_number)
    ) == same


def test_a_name_ending_in_a_number_is_not_another_names_ticket() -> None:
    """`<name>:<number>` splits at the last colon: `a:1` number 2 is not `a` number 12."""
    assert waiter_queue.ticket_key("a:1", 2) != waiter_queue.ticket_key("a", 12)
    assert waiter_queue.ticket_key("a:1", 2) != waiter_queue.ticket_key("a:12", 0)
