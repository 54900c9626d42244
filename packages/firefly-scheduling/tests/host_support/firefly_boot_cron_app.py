"""One locked cron task, for boot checks that must not wait for a sub-minute cadence."""

from __future__ import annotations

from firefly_scheduling import scheduled


@scheduled(cron="* * * * *", lock=True)
def beat() -> None:
    """Runs at most once a minute."""
