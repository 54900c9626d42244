"""A waiting host sleeps until a stop is requested, and a stop signal wakes it at
once, whichever thread the kernel hands the signal to."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

from firefly_scheduling.hosts.runtime.shutdown import StopRequest

#: The child waits with the backstop raised to a minute, so only the wake-up can end
#: its wait before the parent's timeout.
_CHILD = textwrap.dedent(
    """
    import math, signal, threading
    from firefly_scheduling.hosts.runtime import shutdown
    shutdown.WAKE_SECONDS = 60.0
    with shutdown.stop_on_signals(shutdown.StopRequest()) as stop:
        def signal_this_thread():
            signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
        threading.Timer(0.3, signal_this_thread).start()
        woken = stop.wait(math.inf)
    print("woken" if woken else "timed out", stop.signal_name)
    """
)


def test_a_signal_taken_by_another_thread_wakes_the_waiting_main_thread() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["woken", "SIGTERM"]


def test_a_request_from_another_thread_ends_a_wait_without_a_deadline() -> None:
    stop = StopRequest()
    threading.Timer(0.2, stop.request).start()
    assert stop.wait(float("inf")) is True
    assert stop.wait(0.0) is True  # and stays requested


def test_a_wait_without_a_request_returns_false_at_its_timeout() -> None:
    assert StopRequest().wait(0.05) is False
