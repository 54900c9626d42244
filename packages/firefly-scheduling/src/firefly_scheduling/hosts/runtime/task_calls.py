"""Calling a task body, `def` or `async def`, so that it really runs before its verdict.

A coroutine function called like a plain one only builds a coroutine: the body has
not run, and dropping it would report success for nothing. So the result
of every call is looked at, and an awaitable is awaited to completion:

* `call_task` (the synchronous hosts: `run`, `tick`, a threaded APScheduler) hands
  it to the host's own event loop thread (`CoroutineLoop`) and waits for it, within
  what is left of the fire's `timeout=` (`current_fire().seconds_left()`): there, an
  `async def` body is cancelled at its timeout, like on the asyncio host, and when a
  newer fire asks its run to stop (`current_fire().cancel_requested`,
  `overlap="cancel_other"`);
* `acall_task` (the asyncio host) awaits a coroutine function on the running loop,
  and runs a plain function in a worker thread, so a blocking body never stalls
  the loop. Context variables (`current_fire()`) follow the body either way. A
  cancelled coroutine body stops; a cancelled plain body cannot (it is a thread),
  so its fire waits for it before unwinding, and its task lock stays held meanwhile.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Awaitable, Callable

from firefly_scheduling.fires.context import current_fire
from firefly_scheduling.hosts.runtime.coroutine_loop import CoroutineLoop

#: How often a coroutine body run by a threaded host looks for a request to stop.
CANCEL_CHECK_SECONDS = 0.05


def call_task(task: Callable[[], object], coroutines: CoroutineLoop) -> None:
    """Call `task`; an awaitable it returns runs on `coroutines` until it ends."""
    result = task()
    if inspect.isawaitable(result):
        fire = current_fire()
        seconds_left = None if fire is None else fire.seconds_left()
        cancel = None if fire is None else fire.cancel_signal
        if cancel is not None:
            coroutines.run(_awaited_unless_cancelled(result, seconds_left, cancel))
        elif seconds_left is None:
            coroutines.run(_awaited(result))
        else:
            coroutines.run(_awaited_within(result, seconds_left))


async def acall_task(task: Callable[[], object]) -> None:
    """Await `task` on the running loop, or run it in a worker thread when it is plain."""
    if inspect.iscoroutinefunction(task):
        await task()
        return
    thread = asyncio.ensure_future(asyncio.to_thread(task))
    try:
        result = await asyncio.shield(thread)
    except asyncio.CancelledError:
        # Python cannot stop a thread: the body goes on, so this fire must not end (and
        # release its task lock) before the body does. The cancellation is kept.
        await _outlast(thread)
        raise
    if inspect.isawaitable(result):
        await result


async def _outlast(thread: asyncio.Future[object]) -> None:
    """Wait for `thread` to end, through any further cancellation."""
    while not thread.done():
        try:
            await asyncio.shield(thread)
        except asyncio.CancelledError:
            continue
        except Exception:  # noqa: BLE001 - its own outcome no longer matters: cancelled
            return


async def _awaited(awaitable: Awaitable[object]) -> object:
    return await awaitable


async def _awaited_within(awaitable: Awaitable[object], seconds: float) -> object:
    """Await `awaitable`, cancelled after `seconds` (a `TimeoutError` then)."""
    async with asyncio.timeout(seconds):
        return await awaitable


async def _awaited_unless_cancelled(
    awaitable: Awaitable[object], seconds: float | None, cancel: threading.Event
) -> None:
    """Await `awaitable` (within `seconds`), cancelled once `cancel` is set: a newer
    fire asked the run to stop (`overlap="cancel_other"`; the event is a thread's,
    so it is looked at every `CANCEL_CHECK_SECONDS`)."""
    task = asyncio.ensure_future(
        _awaited(awaitable) if seconds is None else _awaited_within(awaitable, seconds)
    )
    while not task.done():
        await asyncio.wait({task}, timeout=CANCEL_CHECK_SECONDS)
        if cancel.is_set() and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            return
    task.result()


def is_async_task(task: Callable[..., object]) -> bool:
    """Whether `task` is written as a coroutine function (`async def`, or a partial of one)."""
    return inspect.iscoroutinefunction(task)
