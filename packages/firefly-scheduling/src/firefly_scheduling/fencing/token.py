"""The fencing token a guarded write is stamped with, checked before anything is sent.

A guarded write compares the caller's token with the one stored beside the resource.
A token that is not a plain non-negative integer cannot be compared meaningfully, so
it is refused here, with the reason, and nothing is written. A None token is the
common mistake: the task runs unlocked, or its lock backend hands out no tokens; the
error says which, naming the task and its lock when the call runs inside a fire.
"""

from __future__ import annotations

import keyword

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.fires.context import current_fire

#: The largest token a guarded write accepts: a signed 64-bit column holds it, and
#: every backend's tokens (counters, revisions, sequences) stay below it.
MAX_TOKEN = 2**63 - 1
#: The column (SQL) or field (Django) a fenced write stores its token in by default.
DEFAULT_COLUMN = "fence_token"


class FencingTokenError(ConfigurationError):
    """A guarded write was given a token, or a fence column, it cannot use; nothing was written."""


def checked_token(token: object, *, caller: str) -> int:
    """`token` as an int in [0, MAX_TOKEN]; anything else raises `FencingTokenError`."""
    if token is None:
        raise FencingTokenError(f"{caller}: the fencing token is None ({_why_no_token()})")
    if isinstance(token, bool) or not isinstance(token, int):
        raise FencingTokenError(
            f"{caller}: the fencing token must be an int, got {token!r} ({type(token).__name__})"
        )
    if not 0 <= token <= MAX_TOKEN:
        raise FencingTokenError(
            f"{caller}: the fencing token must be between 0 and {MAX_TOKEN}, got {token}"
        )
    return token


def checked_column_name(column: object, *, caller: str) -> str:
    """`column` when it is a plain identifier usable as a column and a Django field name."""
    if (
        not isinstance(column, str)
        or not column.isidentifier()
        or keyword.iskeyword(column)
        or column.startswith("_")
        or column.endswith("_")
        or "__" in column
    ):
        raise FencingTokenError(
            f"{caller}: the fence column must be a plain identifier such as"
            f" {DEFAULT_COLUMN!r} (letters, digits, single inner underscores), got {column!r}"
        )
    return column


def _why_no_token() -> str:
    fire = current_fire()
    if fire is None:
        return (
            "called outside a fire: pass the token `try_acquire_fenced` returned, or"
            " `current_fire().token` from a task body"
        )
    if fire.lock_name is None:
        return (
            f"task {fire.target!r} runs unlocked, so it has no fencing token; give it a"
            " task lock on a backend with fencing tokens"
        )
    return (
        f"task {fire.target!r} holds lock {fire.lock_name!r} on a backend without fencing"
        " tokens; use a backend that has them (every first-party one does)"
    )
