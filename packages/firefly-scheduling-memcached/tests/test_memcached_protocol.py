"""The sans-IO memcached protocol: reply parsing (`replies`) and the owner/CAS rules
(`protocol`), without a server."""

from __future__ import annotations

import itertools
from typing import TypeVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from firefly_scheduling_memcached import protocol
from firefly_scheduling_memcached.protocol import Operation
from firefly_scheduling_memcached.replies import (
    MemcachedError,
    MemcachedProtocolError,
    MemcachedServerError,
    Reply,
    ReplyParser,
)

T = TypeVar("T")
OWNER = "0123456789abcdef0123456789abcdef"
STREAM = (
    b"STORED\r\n"
    b"VA 32 c77 t-1\r\n" + OWNER.encode() + b"\r\n"
    b"VA 4\r\na\r\nb\r\n"  # a value may hold CRLF: its size, not a separator, ends it
    b"EN\r\n"
    b"SERVER_ERROR out of memory storing object\r\n"
    b"HD\r\n"
)
EXPECTED = [
    Reply(b"STORED", (), None),
    Reply(b"VA", (b"c77", b"t-1"), OWNER.encode()),
    Reply(b"VA", (), b"a\r\nb"),
    Reply(b"EN", (), None),
    Reply(b"SERVER_ERROR", (b"out of memory storing object",), None),
    Reply(b"HD", (), None),
]


def parse(chunks: list[bytes]) -> list[Reply]:
    parser = ReplyParser()
    replies = []
    for chunk in chunks:
        parser.feed(chunk)
        while (reply := parser.next_reply()) is not None:
            replies.append(reply)
    return replies


def test_a_stream_in_one_read_gives_every_reply_in_order() -> None:
    assert parse([STREAM]) == EXPECTED


@given(cuts=st.lists(st.integers(min_value=1, max_value=len(STREAM) - 1), unique=True))
def test_however_the_stream_is_cut_the_replies_are_the_same(cuts: list[int]) -> None:
    bounds = [0, *sorted(cuts), len(STREAM)]
    assert parse([STREAM[a:b] for a, b in itertools.pairwise(bounds)]) == EXPECTED


@pytest.mark.parametrize(
    ("stream", "message"),
    [
        (b"WHAT\r\n", "unknown reply"),
        (b"VA x\r\n", "malformed value header"),
        (b"VA 2\r\nabcd\r\n", "not followed by CRLF"),
        (b"x" * 5000, "too long"),
    ],
)
def test_a_reply_out_of_step_is_a_protocol_error(stream: bytes, message: str) -> None:
    with pytest.raises(MemcachedProtocolError, match=message):
        parse([stream])


def run(operation: Operation[T], *replies: list[Reply]) -> tuple[list[bytes], T]:
    """Drive `operation` with scripted replies; return the requests it sent and its result."""
    sent = [next(operation).data]
    for answer in replies:
        try:
            sent.append(operation.send(answer).data)
        except StopIteration as finished:
            return sent, finished.value
    raise AssertionError(f"the operation wants more replies after {sent!r}")


def value(data: bytes, cas: bytes = b"77") -> Reply:
    return Reply(b"VA", (b"c" + cas,), data)


def test_release_deletes_with_the_cas_it_read() -> None:
    sent, released = run(
        protocol.release("job", OWNER), [value(OWNER.encode())], [Reply(b"HD", (), None)]
    )
    assert sent == [
        b"mg firefly:scheduling:lock:job v c\r\n",
        b"md firefly:scheduling:lock:job C77\r\n",
    ]
    assert released is True


@pytest.mark.parametrize("found", [Reply(b"EN", (), None), value(b"another-owner")])
def test_release_of_an_item_that_is_not_ours_sends_nothing_more(found: Reply) -> None:
    sent, released = run(protocol.release("job", OWNER), [found])
    assert released is False
    assert len(sent) == 1


@pytest.mark.parametrize("status", [b"EX", b"NF"])
def test_release_loses_when_the_item_changed_since_the_read(status: bytes) -> None:
    _, released = run(
        protocol.release("job", OWNER), [value(OWNER.encode())], [Reply(status, (), None)]
    )
    assert released is False


def test_a_server_without_cas_gets_no_delete_at_all() -> None:
    with pytest.raises(MemcachedError, match="-C"):
        run(protocol.release("job", OWNER), [value(OWNER.encode(), cas=b"0")])


def test_renew_stores_with_cas_never_with_a_meta_set() -> None:
    sent, renewed = run(
        protocol.renew("job", OWNER, 10), [value(OWNER.encode())], [Reply(b"STORED", (), None)]
    )
    assert sent[1].startswith(b"cas firefly:scheduling:lock:job 0 11 32 77\r\n")
    assert renewed is True


def test_acquire_is_a_classic_add() -> None:
    sent, won = run(protocol.acquire("job", OWNER, 10), [Reply(b"NOT_STORED", (), None)])
    assert sent == [b"add firefly:scheduling:lock:job 0 11 32\r\n" + OWNER.encode() + b"\r\n"]
    assert won is False


def test_a_refusal_for_memory_is_a_server_error_that_names_the_command() -> None:
    refusal = Reply(b"SERVER_ERROR", (b"out of memory storing object",), None)
    with pytest.raises(
        MemcachedServerError, match="refused the add command: SERVER_ERROR out of memory"
    ):
        run(protocol.acquire("job", OWNER, 10), [refusal])


def test_a_fenced_acquire_whose_counter_cannot_count_releases_then_raises() -> None:
    operation = protocol.acquire_fenced("job", OWNER, 10)
    first = next(operation)
    assert first.replies == 2
    assert b"\r\nma firefly:scheduling:fence:job N0 J" in first.data
    not_a_number = Reply(b"VA", (), b"abc")
    release_read = operation.send([Reply(b"STORED", (), None), not_a_number])
    assert release_read.data == b"mg firefly:scheduling:lock:job v c\r\n"
    operation.send([value(OWNER.encode())])
    with pytest.raises(MemcachedError, match="meta increment"):
        operation.send([Reply(b"HD", (), None)])


def test_a_fenced_acquire_returns_the_counter() -> None:
    _, token = run(
        protocol.acquire_fenced("job", OWNER, 10),
        [Reply(b"STORED", (), None), Reply(b"VA", (), b"1767225600000001")],
    )
    assert token == 1767225600000001


STORED = Reply(b"STORED", (), None)
NOT_STORED = Reply(b"NOT_STORED", (), None)
OUT_OF_MEMORY = Reply(b"SERVER_ERROR", (b"out of memory storing object",), None)


def test_operations_together_send_one_write_and_each_gets_its_own_replies() -> None:
    """A batch (the resident host's claims or task locks): one request, answers in order.

    A refusal is its own operation's answer; an operation that needs a second round
    trip (a fenced acquire whose counter cannot count releases) gets it in the next
    write, alone.
    """
    operations = [
        protocol.acquire("a", OWNER, 10),
        protocol.acquire_fenced("b", OWNER, 10),
        protocol.acquire("c", OWNER, 10),
        protocol.acquire_fenced("d", OWNER, 10),
    ]
    batch = protocol.together(operations)
    first = next(batch)
    assert first.replies == 1 + 2 + 1 + 2
    assert first.data.startswith(b"add firefly:scheduling:lock:a ")
    assert first.data.count(b"add ") == 4
    assert first.data.count(b"\r\nma firefly:scheduling:fence:") == 2
    second = batch.send(
        [STORED, STORED, Reply(b"VA", (), b"7"), OUT_OF_MEMORY, STORED, Reply(b"VA", (), b"x")]
    )
    assert second.data == b"mg firefly:scheduling:lock:d v c\r\n", "d alone frees its lock"
    assert second.replies == 1
    with pytest.raises(StopIteration) as finished:
        batch.send([Reply(b"EN", (), None)])
    a, b, c, d = finished.value.value
    assert (a, b) == (True, 7)
    assert isinstance(c, MemcachedServerError)
    assert isinstance(d, MemcachedError), "d's counter could not count: its own error"


def test_a_reply_one_operation_cannot_use_is_its_own_error_and_the_others_stand() -> None:
    """The parser took it whole, so the stream is in step: the other answers are good."""
    batch = protocol.together([protocol.acquire("a", OWNER, 10), protocol.acquire("b", OWNER, 10)])
    next(batch)
    with pytest.raises(StopIteration) as finished:
        batch.send([STORED, Reply(b"HD", (), None)])
    a, b = finished.value.value
    assert a is True
    assert isinstance(b, MemcachedError)
    assert "unexpected reply to the add" in str(b)


def test_a_large_batch_goes_in_writes_of_at_most_batch_operations() -> None:
    count = protocol.BATCH_OPERATIONS * 2 + 3
    batch = protocol.together([protocol.acquire(f"n{i}", OWNER, 10) for i in range(count)])
    sizes, answers = [], None
    request = next(batch)
    try:
        while True:
            sizes.append(request.replies)
            request = batch.send([NOT_STORED] * request.replies)
    except StopIteration as finished:
        answers = finished.value
    assert sizes == [protocol.BATCH_OPERATIONS, protocol.BATCH_OPERATIONS, 3]
    assert answers == [False] * count
