"""The bound on the connections one lock instance opens, checked one way for every backend.

A node shares one lock instance among all its worker threads (hosts default to up to
64), so a client pool that grows with its callers opens one connection per busy
thread. Backends that pool their connections bound the pool at `pool_size`
(default `DEFAULT_POOL_SIZE`), given as a constructor argument or as `?pool_size=`
in the lock URL; callers beyond it wait for a connection to come back, and a wait
that outlasts the backend's bound ends in `PoolExhaustedError`. docs/scaling.md
lists the bound of each backend.
"""

from __future__ import annotations

from typing import Final

from firefly_scheduling.errors import ConfigurationError

#: Connections one lock instance opens at most, unless told otherwise.
DEFAULT_POOL_SIZE: Final = 4


class PoolExhaustedError(TimeoutError):
    """Every connection of a bounded pool stayed busy for longer than a caller may wait.

    A `TimeoutError` (an `OSError`), so every backend already reports it as a
    `LockBackendError`; its message names the bound and how to raise it.
    """

    def __init__(self, size: int, waited_seconds: float, *, setting: str = "pool_size") -> None:
        # `setting`: what raises the bound (SQL backends: max_connections, the node's budget).
        super().__init__(
            f"all {size} connections of the pool (pool_size={size}) stayed busy for "
            f"{waited_seconds:g} s; a slow or unreachable server keeps them busy, or the "
            f"node needs more: raise {setting}= (the lock's argument or its URL's query)"
        )
        self.size = size
        self.waited_seconds = waited_seconds


def check_pool_size(value: object, *, source: str, text: bool = False) -> int:
    """Return `value` as a pool size, or raise `ConfigurationError` naming it and `source`.

    `source` says where the value came from ("the lock's pool_size argument",
    "pool_size= of the URL <the URL, redacted>"), and must hold no credential.
    An argument must be an `int` (a bool is refused); with `text`, the value comes
    from a URL's query and must be a decimal whole number.
    """
    size: int | None = None
    if isinstance(value, str) and text:
        size = int(value) if value.isascii() and value.isdecimal() else None
    elif isinstance(value, int) and not isinstance(value, bool):
        size = value
    if size is None or size < 1:
        raise ConfigurationError(
            f"{source} must be a whole number of connections, at least 1; got {value!r}"
        )
    return size


def chosen_pool_size(argument: object, from_url: int | None, *, owner: str, shown: str) -> int:
    """The bound to use: the constructor's `argument`, else the URL's, else the default.

    `argument` is None when the caller left it out; `from_url` is the URL's checked
    `pool_size=` (None when absent). Giving both, with different values, is refused:
    neither silently wins. `owner` names the lock ("the redis lock"), `shown` its URL
    with any password masked.
    """
    if argument is None:
        return DEFAULT_POOL_SIZE if from_url is None else from_url
    size = check_pool_size(argument, source=f"{owner}'s pool_size argument")
    if from_url is not None and from_url != size:
        raise ConfigurationError(
            f"{owner} got pool_size={size} as an argument and pool_size={from_url} in its "
            f"URL {shown}; give one of them"
        )
    return size
