"""The demo's tasks: one of each kind of trigger the decorator accepts.

Each task only logs a line, so a demo shows who ran what and when. Importing this
module schedules nothing: `@scheduled` only attaches metadata.
"""

from __future__ import annotations

import logging
import os
import socket

from firefly_scheduling import scheduled

logger = logging.getLogger(__name__)


def _node() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@scheduled(fixed_rate="1s", lock=True, lock_ttl="5s")
def heartbeat() -> None:
    """Every second, on one node of the fleet at a time (locked)."""
    logger.info("heartbeat from %s", _node())


@scheduled(cron="* * * * *", zone="Europe/Paris", lock="example-minute-report")
def minute_report() -> None:
    """At the start of every minute, Paris time, under an explicitly named lock."""
    logger.info("minute report from %s", _node())


@scheduled(fixed_delay="5s", lock=False)
def tidy_up() -> None:
    """Five seconds after the previous run ended, on every node (unlocked)."""
    logger.info("tidy up on %s", _node())


@scheduled(fixed_rate="PT10S", initial_delay="30s", lock=True)
def warm_cache() -> None:
    """Every ten seconds, but only once 30 s have passed since the task was first seen."""
    logger.info("warm cache from %s", _node())


class Reports:
    """Method tasks: the class is instantiated once per process, with no arguments."""

    def __init__(self) -> None:
        self.sent = 0

    @scheduled(cron="0 3 * * 0", zone="America/New_York", lock=True, lock_ttl="10m")
    def weekly_digest(self) -> None:
        """Sundays at 03:00 in New York."""
        self.sent += 1
        logger.info("weekly digest #%d from %s", self.sent, _node())
