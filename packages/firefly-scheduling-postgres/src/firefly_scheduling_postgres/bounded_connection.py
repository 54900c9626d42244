"""psycopg's connections, with every reply wait bounded (`locks.reply_deadline`).

A frozen server, or a connection that silently lost a request, would otherwise keep
a lock's session waiting for ever: see `firefly_scheduling.concurrency.reply_deadline_async` for
why neither the server's nor TCP's timeouts end such a wait. The lock connects with
these classes; nothing else changes.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import errors as pg_errors

from firefly_scheduling.concurrency.reply_deadline import ReplyDeadline
from firefly_scheduling.concurrency.reply_deadline_async import AsyncReplyDeadline

#: psycopg's wait timeout (private, since psycopg 3.2; the frozen-server test pins it).
_WAIT_TIMEOUT: type[Exception] = pg_errors._WaitTimeout


class BoundedConnection(ReplyDeadline, psycopg.Connection[tuple[Any, ...]]):
    """A psycopg connection whose round trips end within `REPLY_TIMEOUT_SECONDS`."""

    wait_timeout_error = _WAIT_TIMEOUT
    no_reply_error = psycopg.OperationalError


class AsyncBoundedConnection(AsyncReplyDeadline, psycopg.AsyncConnection[tuple[Any, ...]]):
    """A psycopg asyncio connection whose round trips end within `REPLY_TIMEOUT_SECONDS`."""

    wait_timeout_error = _WAIT_TIMEOUT
    no_reply_error = psycopg.OperationalError
