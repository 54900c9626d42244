"""`async def` task bodies for the async-task tests (the tests put this directory on sys.path).

Each body awaits before it records, so a coroutine that is created but never awaited
records nothing: the defect this guards against was a host reporting such a body as succeeded.
"""

from __future__ import annotations

import asyncio
import threading

from firefly_scheduling import current_fire

#: (name, the fire's target or None, the running loop's id, the thread's name)
CALLS: list[tuple[str, str | None, int, str]] = []
_MUTEX = threading.Lock()


def _record(name: str) -> None:
    fire = current_fire()
    loop = asyncio.get_running_loop()
    with _MUTEX:
        CALLS.append(
            (name, None if fire is None else fire.target, id(loop), threading.current_thread().name)
        )


def calls(name: str) -> list[tuple[str, str | None, int, str]]:
    with _MUTEX:
        return [call for call in CALLS if call[0] == name]


def reset() -> None:
    with _MUTEX:
        CALLS.clear()


async def tock() -> None:
    await asyncio.sleep(0.01)
    _record("tock")


async def atick() -> None:
    await asyncio.sleep(0.01)
    _record("atick")


async def aboom() -> None:
    await asyncio.sleep(0)
    raise RuntimeError("aboom")


class AsyncService:
    """A method task written as a coroutine."""

    async def poll(self) -> None:
        await asyncio.sleep(0)
        _record("poll")
