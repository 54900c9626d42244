"""A sub-second task, named explicitly (`--app shop.fast_tasks`) by the resident-host test."""

from firefly_scheduling import scheduled
from shop.tasks import _log


@scheduled(fixed_rate="500ms", lock=True)
def heartbeat() -> None:
    _log("heartbeat")
