"""A scanned module for the library-host tests: one decorated task."""

from __future__ import annotations

from firefly_host_unit_tasks import ping

from firefly_scheduling import scheduled


@scheduled(fixed_rate="200ms", lock=True)
def heartbeat() -> None:
    ping()
