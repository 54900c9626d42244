"""Where the contract suite finds real servers.

`FIREFLY_TEST_<BACKEND>_URL` wins. Without it, a testcontainers container is started
where a Docker engine answers. Otherwise the test is skipped, unless
`FIREFLY_TEST_REQUIRE_SERVERS=1`, which turns a missing server into a failure: CI must
never pass by skipping the backends it claims to test.
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Callable

import pytest

_CONTAINER_URLS: dict[str, str] = {}


def servers_required() -> bool:
    return os.environ.get("FIREFLY_TEST_REQUIRE_SERVERS", "").strip() in {"1", "true", "yes"}


def server_url(backend: str, container: Callable[[], str] | None = None) -> str:
    """The URL of a real `backend` server for tests, or skip/fail as configured.

    `container`, if given, starts a testcontainers container and returns its URL;
    it is only tried when no URL is configured and a Docker engine is reachable.
    """
    variable = f"FIREFLY_TEST_{backend.upper()}_URL"
    url = os.environ.get(variable, "").strip()
    if url:
        return url
    if backend in _CONTAINER_URLS:
        return _CONTAINER_URLS[backend]
    problem = f"no {backend} server: set {variable}"
    if container is not None:
        try:
            _CONTAINER_URLS[backend] = container()
            return _CONTAINER_URLS[backend]
        except Exception as err:  # noqa: BLE001 - any failure here means "no Docker"
            problem += f" (testcontainers could not start one: {type(err).__name__})"
    if servers_required():
        pytest.fail(f"{problem}; FIREFLY_TEST_REQUIRE_SERVERS=1 makes this a failure")
    pytest.skip(problem)


def register_container_cleanup(stop: Callable[[], None]) -> None:
    """Stop a started container when the test session's process exits."""
    atexit.register(stop)
