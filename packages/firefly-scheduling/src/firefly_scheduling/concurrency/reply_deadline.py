# Generated from reply_deadline_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""`ReplyDeadline`: a driver connection that stops waiting for a reply it never gets.

A request the server received and never answers (the server process frozen, a
connection desynchronised by a network fault, a middlebox that dropped what it
acknowledged) leaves a blocking driver waiting for ever: psycopg has no client-side
read timeout, the server's `statement_timeout` never runs for a request the server
is not working on, and TCP's keep-alives and `tcp_user_timeout` see a healthy
connection, since the peer's kernel acknowledges every segment. Found by the fault
checker (`benchmarks/chaos.py`, seed 120402): one such connection stopped a node's
fire claimer, which every locked fire goes through, until the node was killed.

This mixin goes in front of a driver connection class whose `wait(gen, interval,
timeout)` carries every round trip after the connect and raises
`wait_timeout_error` when `timeout` passes (psycopg 3.2 and later). A wait with no
timeout of its own gets `reply_timeout_seconds`. When it passes, the connection is
closed, because its protocol state is unknown (a late reply would answer the next
statement), and `no_reply_error`, a driver error, is raised: every caller handles it
as the disconnect it is. A session lock marks the session's holdings lost and
reconnects; a pool discards the connection.

The bound is twice the statement timeout the backends set on the server
(`statement_timeout`, 5 s), so a statement the server ends by itself is answered
first, and the client's bound only ends a wait the server will never end.

Written once, for asyncio, in `concurrency/reply_deadline_async.py`; the synchronous flavour in
`concurrency/reply_deadline.py` is generated from it by `tools/async_to_sync.py`.
"""

from __future__ import annotations

from typing import Any, ClassVar

#: The longest a round trip waits for the server's reply, in seconds.
REPLY_TIMEOUT_SECONDS = 10.0
#: How often the driver's wait wakes to check for a signal (psycopg's own default).
_WAIT_INTERVAL = 0.1


class ReplyDeadline:
    """Mixin: bound every reply wait of a driver connection (see the module's docstring)."""

    reply_timeout_seconds: ClassVar[float] = REPLY_TIMEOUT_SECONDS
    #: What the driver's `wait` raises when its `timeout` passes.
    wait_timeout_error: ClassVar[type[Exception]]
    #: The driver error to raise instead, the connection closed.
    no_reply_error: ClassVar[type[Exception]]

    def wait(self, gen: Any, interval: float = _WAIT_INTERVAL, timeout: float | None = None) -> Any:
        driver: Any = super()
        if timeout is not None:  # the driver's own bound (a cancel, a notification wait)
            return driver.wait(gen, interval, timeout)
        try:
            return driver.wait(gen, interval, self.reply_timeout_seconds)
        except self.wait_timeout_error:
            driver.close()
        raise self.no_reply_error(
            f"the server sent no reply within {self.reply_timeout_seconds:g} s; "
            "the connection was closed, as its protocol state is unknown"
        )
