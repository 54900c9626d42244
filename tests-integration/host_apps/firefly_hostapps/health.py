"""A locked task every second, for the health-endpoint tests of `run --health-port`."""

from __future__ import annotations

from firefly_scheduling import scheduled


@scheduled(fixed_rate="1s")
def every_second() -> None:
    """Does nothing: the test watches the host, not the task."""
