"""Shared by the core's unit tests: every test leaves the process's signal handlers as it
found them.

`run` and `tick` invoked in-process (click's runner) install SIGTERM/SIGINT handlers
and, once stopped, ignore both signals, as a host process about to exit should. In
the test process that would outlive the test: a later test's child processes would
inherit the ignored signals and could no longer be terminated.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@pytest.fixture(autouse=True)
def _restore_stop_signals() -> Iterator[None]:
    saved = {signum: signal.getsignal(signum) for signum in _STOP_SIGNALS}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)
