"""How many connections one node may open to one SQL server, and how they are shared.

A node talks to a session-lock server (or a `database` lock's server) through up to
three components built from the same URL: the lock's pool, the run history and the
initial-delay anchor store (the two stores share one engine per process and URL).
Each takes a fixed share of ONE budget, `max_connections` (a URL query parameter,
or the constructors' argument of that name), so the node's total stays within the
budget whatever the worker count and whichever components are in use. A caller that
finds its share busy waits (up to `POOL_TIMEOUT_SECONDS`); nothing ever opens a
connection beyond it.

The split (`shares`): the lock takes half, rounded down; the stores the rest. The
default budget, 4, is lock 2 and stores 2, so 16 nodes open at most 64 connections
and stay within PostgreSQL's default 100. The lock needs two sessions for a held
lock's keep-alive not to wait behind a claim; the run history writes twice per fire
run, and one connection for it measurably queued fires (benchmarks/fleet.py, 100
tasks x 2 nodes). The smallest budget is 2: one connection for the lock, one for
the stores.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final
from urllib.parse import unquote

from firefly_scheduling.errors import ConfigurationError

#: The URL query parameter (and constructor argument) that sets the budget.
URL_PARAMETER: Final = "max_connections"
DEFAULT_MAX_CONNECTIONS: Final = 4
#: One connection for the lock, one for the run history and anchor store.
MIN_MAX_CONNECTIONS: Final = 2
#: Longest a caller waits for a busy pool before `LockBackendError` (or the store's error).
#: SQLAlchemy's default: long, because a pool that makes progress can still keep one
#: waiter waiting a while (64 workers on 2 sessions, a loaded machine); a wait this
#: long means a stuck statement, not a busy node.
POOL_TIMEOUT_SECONDS: Final = 30.0


@dataclass(frozen=True)
class ConnectionShares:
    """Each component's share of one node's budget for one server."""

    budget: int
    #: The lock's pool (sessions, or its engine's connections).
    lock: int
    #: The engine the run history and the anchor store share.
    stores: int


def shares(budget: int) -> ConnectionShares:
    """The split of `budget` (already checked by `max_connections`); see the module doc."""
    lock = budget // 2
    return ConnectionShares(budget, lock, budget - lock)


def max_connections(value: object, *, source: str) -> int:
    """`value` as a budget, or a `ConfigurationError` naming it and `source`.

    `source` says where the value came from ("the URL's max_connections query
    parameter", "the max_connections argument"), so the message points at the fix.
    """
    budget: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        budget = value
    elif isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        budget = int(value.strip())
    if budget is None or budget < MIN_MAX_CONNECTIONS:
        raise ConfigurationError(
            f"{URL_PARAMETER} must be a whole number of at least {MIN_MAX_CONNECTIONS} "
            f"(one connection for the lock, one for the run history and anchor store), "
            f"got {value!r} from {source}"
        )
    return budget


def budget_for(url: str, argument: int | None) -> tuple[str, ConnectionShares]:
    """`url` without its `max_connections` parameter, and the shares of the budget.

    The budget is `argument` when given, else the URL's parameter, else the default;
    the two given with different values is a `ConfigurationError`. The URL is
    returned otherwise untouched (its other parameters keep their exact spelling), as
    the driver must never see a parameter it does not know.
    """
    stripped, given = take_url_parameter(url, URL_PARAMETER)
    from_url = (
        None
        if given is None
        else max_connections(given, source=f"the URL's {URL_PARAMETER} query parameter")
    )
    from_argument = (
        None
        if argument is None
        else max_connections(argument, source=f"the {URL_PARAMETER} argument")
    )
    if from_url is not None and from_argument is not None and from_url != from_argument:
        raise ConfigurationError(
            f"{URL_PARAMETER} is {from_argument} by argument but {from_url} in the URL's "
            "query; give it once"
        )
    budget = from_argument or from_url or DEFAULT_MAX_CONNECTIONS
    return stripped, shares(budget)


def take_url_parameter(url: str, parameter: str) -> tuple[str, str | None]:
    """`url` without the query parameter `parameter`, and its value (None if absent).

    Given twice is a `ConfigurationError`. A string that is no URL (a libpq key=value
    string) comes back as it is.
    """
    if not isinstance(url, str) or "://" not in url:
        return url, None
    # By hand, not urlsplit/urlunsplit: those respell some URLs (`postgresql:///db`).
    base, hash_mark, fragment = url.partition("#")
    head, _, query = base.partition("?")
    kept: list[str] = []
    values: list[str] = []
    for pair in query.split("&") if query else []:
        key, _, value = pair.partition("=")
        if unquote(key) == parameter:
            values.append(unquote(value))
        else:
            kept.append(pair)
    if not values:
        return url, None
    if len(values) > 1:
        raise ConfigurationError(
            f"the URL's {parameter} query parameter is given {len(values)} times; give it once"
        )
    rest = ("?" + "&".join(kept) if kept else "") + hash_mark + fragment
    return head + rest, values[0]
