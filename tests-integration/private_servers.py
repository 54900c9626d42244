"""Commands of private throwaway servers (`LocalServer`), shared by the fault tests.

A test that stops, fills or reconfigures a server starts its own, never the shared
one; each function here returns the argv of one on a given port.
"""

from __future__ import annotations

from collections.abc import Callable


def redis_server(*options: str) -> Callable[[int], list[str]]:
    """A `redis-server` on loopback without persistence (a restart forgets every key)."""

    def command(port: int) -> list[str]:
        return [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            *options,
        ]

    return command
