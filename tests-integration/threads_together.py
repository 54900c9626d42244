"""Calls made from threads of their own, all let go at once, for the tests of what
several nodes (or one shared client) do when they really overlap.

A thread's exception would only be printed; `run_together` hands every one back, so
the test asserts on them in the main thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

Item = TypeVar("Item")


def run_together(
    work: Callable[[Item], object], items: Sequence[Item], *, timeout: float | None = None
) -> list[BaseException]:
    """Call `work(item)` for every item, each in a thread of its own, started together
    (a barrier) and joined (each join waiting at most `timeout`); what any of them raised."""
    start = threading.Barrier(len(items))
    errors: list[BaseException] = []
    mutex = threading.Lock()

    def call(item: Item) -> None:
        try:
            start.wait()
            work(item)
        except BaseException as err:  # noqa: BLE001 - handed to the main thread
            with mutex:
                errors.append(err)

    threads = [threading.Thread(target=call, args=(item,)) for item in items]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout)
    return errors
