"""PostgreSQL through SQLAlchemy: psycopg's connections, every reply wait bounded.

SQLAlchemy's psycopg dialects connect with psycopg's own classes, whose waits for a
reply have no end: a frozen server, or a connection that silently lost a request,
would hold a pooled connection, and the lock or store call on it, for ever (see
`firefly_scheduling.concurrency.reply_deadline_async`). `engine` makes both dialects connect with
these classes instead: the synchronous one through the `do_connect` event, the
asyncio one through its `async_creator_fn` connect argument. Imported only for a
PostgreSQL URL, so psycopg stays optional.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import errors as pg_errors

from firefly_scheduling.concurrency.reply_deadline import ReplyDeadline
from firefly_scheduling.concurrency.reply_deadline_async import AsyncReplyDeadline
from firefly_scheduling.errors import ConfigurationError

#: psycopg's wait timeout (private, since psycopg 3.2; the frozen-server test pins it).
_WAIT_TIMEOUT: type[Exception] | None = getattr(pg_errors, "_WaitTimeout", None)
if _WAIT_TIMEOUT is None:  # raised where the engine is built: at boot, never silently
    raise ConfigurationError(
        "the database lock provider needs psycopg 3.2 or later for PostgreSQL, whose "
        f"waits for a reply it bounds; psycopg {psycopg.__version__} is installed"
    )


class BoundedPsycopgConnection(ReplyDeadline, psycopg.Connection[tuple[Any, ...]]):
    """What the synchronous dialect connects with (`connect_bounded`)."""

    wait_timeout_error = _WAIT_TIMEOUT  # type: ignore[assignment]  # not None: checked above
    no_reply_error = psycopg.OperationalError


class AsyncBoundedPsycopgConnection(AsyncReplyDeadline, psycopg.AsyncConnection[tuple[Any, ...]]):
    """What the asyncio dialect connects with (its `async_creator_fn`)."""

    wait_timeout_error = _WAIT_TIMEOUT  # type: ignore[assignment]  # not None: checked above
    no_reply_error = psycopg.OperationalError


def connect_bounded(
    dialect: Any, record: Any, cargs: tuple[Any, ...], cparams: dict[str, Any]
) -> BoundedPsycopgConnection:
    """The `do_connect` event: the dialect's own arguments, to the bounded class."""
    del dialect, record
    return BoundedPsycopgConnection.connect(*cargs, **cparams)
