"""Tasks of the test app, found because the app has a tasks.py."""

import os
import time

from firefly_scheduling import scheduled


def _log(name: str) -> None:
    with open(os.environ["FIREFLY_DJANGO_TEST_LOG"], "a") as log:
        log.write(f"{time.monotonic_ns()} {os.getpid()} {name}\n")


@scheduled(cron="* * * * *", lock=True)
def nightly_reconcile() -> None:
    _log("nightly_reconcile")
